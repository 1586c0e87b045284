//! Lines of `/proc/self/mountinfo`: mount point (unescaped), file system type, source and super
//! options, for the fingerprint (cgroup hierarchy, the data dir's device) and the alloc dir
//! (leftover mounts).
//!
//! Not here: reading the file, or what a mount means to the caller.

/// One line of `/proc/self/mountinfo`: mount point, file system type, source.
pub(crate) struct MountLine<'a> {
    pub(crate) mount_point: String,
    pub(crate) fs_type: &'a str,
    pub(crate) source: &'a str,
    pub(crate) super_options: &'a str,
}

/// The mount point of one line of `/proc/self/mountinfo`, unescaped.
pub(crate) fn mount_point_of_mountinfo_line(line: &str) -> Option<String> {
    parse_mountinfo_line(line).map(|mount| mount.mount_point)
}

pub(crate) fn parse_mountinfo_line(line: &str) -> Option<MountLine<'_>> {
    // Fields: id parent major:minor root mount-point options [optional…] - fstype source super-opts
    let (before, after) = line.split_once(" - ")?;
    let mount_point = unescape_mount_path(before.split(' ').nth(4)?);
    let mut after_fields = after.split(' ');
    let fs_type = after_fields.next()?;
    let source = after_fields.next()?;
    let super_options = after_fields.next().unwrap_or("");
    Some(MountLine {
        mount_point,
        fs_type,
        source,
        super_options,
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mount_path(escaped: &str) -> String {
    let bytes = escaped.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'\\'
            && let Some(octal) = escaped.get(index + 1..index + 4)
            && let Ok(value) = u8::from_str_radix(octal, 8)
        {
            out.push(value);
            index += 4;
            continue;
        }
        out.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
