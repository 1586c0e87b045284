//! Tests of the cgroup module: file formats against a tempdir cgroupfs (v1, v2, hybrid), and,
//! when run as root on a host with cgroups, the real kernel.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::process::{Child, Command};

fn write(path: &Path, content: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap()
}

/// A cgroup2 root as the kernel shows it.
fn fake_v2_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    write(
        &root.path().join("cgroup.controllers"),
        "cpuset cpu io memory hugetlb pids\n",
    );
    write(&root.path().join("cgroup.subtree_control"), "");
    write(&root.path().join("cgroup.procs"), "1\n");
    root
}

/// A v1 root with the usual controllers, optionally with the hybrid unified tree.
fn fake_v1_root(unified: bool) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for controller in [
        "memory", "cpu", "cpuacct", "pids", "freezer", "cpuset", "blkio",
    ] {
        write(&root.path().join(controller).join("cgroup.procs"), "1\n");
    }
    write(&root.path().join("cpuset/cpuset.cpus"), "0-1\n");
    write(&root.path().join("cpuset/cpuset.mems"), "0\n");
    if unified {
        write(&root.path().join("unified/cgroup.controllers"), "");
        write(&root.path().join("unified/cgroup.procs"), "1\n");
    }
    root
}

#[test]
fn detects_v2_v1_and_hybrid_layouts() {
    assert_eq!(detect_mode(fake_v2_root().path()).unwrap(), CgroupMode::V2);
    assert_eq!(
        detect_mode(fake_v1_root(false).path()).unwrap(),
        CgroupMode::V1 { unified: false }
    );
    assert_eq!(
        detect_mode(fake_v1_root(true).path()).unwrap(),
        CgroupMode::V1 { unified: true }
    );
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        detect_mode(empty.path()),
        Err(CgroupError::NoCgroupFilesystem { .. })
    ));
}

#[test]
fn names_that_escape_the_root_are_refused() {
    let root = fake_v2_root();
    for name in ["", "/abs", "a/../b", "a//b", ".", "a/./b", "bad\nname"] {
        assert!(
            matches!(
                TaskCgroup::open(root.path(), name),
                Err(CgroupError::InvalidName { .. })
            ),
            "{name:?} accepted"
        );
    }
    assert!(TaskCgroup::open(root.path(), "drover/alloc-1.web").is_ok());
}

#[test]
fn v2_create_enables_controllers_in_ancestors_and_writes_limits() {
    let root = fake_v2_root();
    let cgroup = TaskCgroup::open(root.path(), "drover/a1.web").unwrap();
    cgroup
        .create(&CgroupLimits {
            memory_soft_bytes: Some(64 << 20),
            memory_hard_bytes: Some(128 << 20),
            cpu_shares: Some(1024),
            pids_max: Some(100),
            cpuset_cpus: Some("0".into()),
        })
        .unwrap();
    let leaf = root.path().join("drover/a1.web");
    assert!(leaf.is_dir());
    for ancestor in [root.path().to_path_buf(), root.path().join("drover")] {
        let control = read(&ancestor.join("cgroup.subtree_control"));
        for controller in ["+memory", "+cpu", "+pids", "+cpuset"] {
            assert!(control.contains(controller), "{ancestor:?}: {control}");
        }
        assert!(!control.contains("+io"), "io is not needed: {control}");
    }
    assert!(!leaf.join("cgroup.subtree_control").exists());
    assert_eq!(read(&leaf.join("memory.max")), (128u64 << 20).to_string());
    assert_eq!(read(&leaf.join("memory.low")), (64u64 << 20).to_string());
    assert_eq!(read(&leaf.join("cpu.weight")), "39");
    assert_eq!(read(&leaf.join("pids.max")), "100");
    assert_eq!(read(&leaf.join("cpuset.cpus")), "0");
}

#[test]
fn cpu_shares_map_onto_weights_at_the_ends_and_default() {
    assert_eq!(cpu_shares_to_weight(2), 1);
    assert_eq!(cpu_shares_to_weight(262_144), 10_000);
    assert_eq!(cpu_shares_to_weight(1024), 39);
    assert_eq!(cpu_shares_to_weight(0), 1);
}

#[test]
fn v2_stats_and_oom_kills_are_read_from_kernel_formats() {
    let root = fake_v2_root();
    let cgroup = TaskCgroup::open(root.path(), "drover/a1.web").unwrap();
    cgroup.create(&CgroupLimits::default()).unwrap();
    let leaf = root.path().join("drover/a1.web");
    write(
        &leaf.join("memory.stat"),
        "anon 1048576\nfile 2097152\nkernel 4096\nkernel_stack 16384\nslab 8192\nsock 0\n",
    );
    write(&leaf.join("memory.current"), "3149824\n");
    write(&leaf.join("memory.peak"), "4194304\n");
    write(&leaf.join("memory.swap.current"), "512\n");
    write(
        &leaf.join("memory.events"),
        "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 0\n",
    );
    write(
        &leaf.join("cpu.stat"),
        "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 10\nnr_throttled 4\nthrottled_usec 250\n",
    );
    write(&leaf.join("cgroup.procs"), "42\n7\n");

    let memory = cgroup.memory_stats().unwrap();
    assert_eq!(
        memory,
        CgroupMemoryStats {
            rss: 1_048_576,
            cache: 2_097_152,
            swap: 512,
            usage: 3_149_824,
            max_usage: 4_194_304,
            kernel_usage: 4096,
            kernel_max_usage: 0,
        }
    );
    let cpu = cgroup.cpu_stats().unwrap();
    assert_eq!(
        cpu,
        CgroupCpuStats {
            total_ns: 1_500_000,
            user_ns: 1_000_000,
            system_ns: 500_000,
            throttled_periods: 4,
            throttled_time_ns: 250_000,
        }
    );
    assert_eq!(cgroup.oom_kill_count().unwrap(), Some(2));
    assert_eq!(cgroup.pids().unwrap(), vec![7, 42]);
}

#[test]
fn v2_kernel_usage_falls_back_to_its_parts_on_older_kernels() {
    let root = fake_v2_root();
    let cgroup = TaskCgroup::open(root.path(), "t").unwrap();
    cgroup.create(&CgroupLimits::default()).unwrap();
    let leaf = root.path().join("t");
    write(
        &leaf.join("memory.stat"),
        "anon 1\nfile 2\nkernel_stack 16\nslab 8\npercpu 4\n",
    );
    write(&leaf.join("memory.current"), "3\n");
    assert_eq!(cgroup.memory_stats().unwrap().kernel_usage, 28);
}

#[test]
fn v2_kill_uses_cgroup_kill_when_present() {
    let root = fake_v2_root();
    let cgroup = TaskCgroup::open(root.path(), "drover/k").unwrap();
    cgroup.create(&CgroupLimits::default()).unwrap();
    let leaf = root.path().join("drover/k");
    write(&leaf.join("cgroup.kill"), "");
    write(&leaf.join("cgroup.procs"), "");
    // Empty cgroup: nothing to do, and cgroup.kill is not touched.
    cgroup.kill_all(Duration::from_secs(1)).unwrap();
    assert_eq!(read(&leaf.join("cgroup.kill")), "");
    // A pid that a fake cgroupfs never removes: the kill is requested, then times out.
    write(&leaf.join("cgroup.procs"), "999999999\n");
    let error = cgroup.kill_all(Duration::from_millis(50)).unwrap_err();
    assert!(
        matches!(error, CgroupError::KillTimedOut { ref remaining, .. } if remaining == &[999_999_999])
    );
    assert_eq!(read(&leaf.join("cgroup.kill")), "1");
}

#[test]
fn v1_create_writes_limits_per_controller_and_seeds_cpuset() {
    let root = fake_v1_root(true);
    let cgroup = TaskCgroup::open(root.path(), "drover/a1.web").unwrap();
    let created: Vec<PathBuf> = cgroup.paths().map(Path::to_path_buf).collect();
    assert_eq!(created.len(), 7, "six controllers and unified: {created:?}");
    assert!(
        !created
            .iter()
            .any(|path| path.starts_with(root.path().join("blkio")))
    );
    write(
        &root
            .path()
            .join("memory/drover/a1.web/memory.memsw.limit_in_bytes"),
        "",
    );
    cgroup
        .create(&CgroupLimits {
            memory_soft_bytes: Some(100),
            memory_hard_bytes: Some(200),
            cpu_shares: Some(512),
            pids_max: Some(7),
            cpuset_cpus: None,
        })
        .unwrap();
    let path = |rest: &str| root.path().join(rest);
    assert_eq!(
        read(&path("memory/drover/a1.web/memory.limit_in_bytes")),
        "200"
    );
    assert_eq!(
        read(&path("memory/drover/a1.web/memory.memsw.limit_in_bytes")),
        "200"
    );
    assert_eq!(
        read(&path("memory/drover/a1.web/memory.soft_limit_in_bytes")),
        "100"
    );
    assert_eq!(read(&path("cpu/drover/a1.web/cpu.shares")), "512");
    assert_eq!(read(&path("pids/drover/a1.web/pids.max")), "7");
    assert_eq!(read(&path("cpuset/drover/cpuset.cpus")), "0-1");
    assert_eq!(read(&path("cpuset/drover/a1.web/cpuset.mems")), "0");
    assert!(path("unified/drover/a1.web").is_dir());
    assert!(path("freezer/drover/a1.web").is_dir());

    cgroup.remove().unwrap();
    assert!(!cgroup.exists());
    assert!(
        path("memory/drover").is_dir(),
        "parents are shared and stay"
    );
}

#[test]
fn v1_stats_and_oom_kills_are_read_from_kernel_formats() {
    let root = fake_v1_root(false);
    let cgroup = TaskCgroup::open(root.path(), "t").unwrap();
    cgroup.create(&CgroupLimits::default()).unwrap();
    let path = |rest: &str| root.path().join(rest);
    write(
        &path("memory/t/memory.stat"),
        "cache 8192\nrss 4096\nrss_huge 0\nswap 16\ntotal_rss 4096\n",
    );
    write(&path("memory/t/memory.usage_in_bytes"), "12288\n");
    write(&path("memory/t/memory.max_usage_in_bytes"), "20480\n");
    write(&path("memory/t/memory.kmem.usage_in_bytes"), "100\n");
    write(&path("memory/t/memory.kmem.max_usage_in_bytes"), "200\n");
    write(
        &path("memory/t/memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
    );
    write(&path("cpuacct/t/cpuacct.usage"), "3000\n");
    write(&path("cpuacct/t/cpuacct.stat"), "user 3\nsystem 2\n");
    write(
        &path("cpu/t/cpu.stat"),
        "nr_periods 9\nnr_throttled 2\nthrottled_time 777\n",
    );
    assert_eq!(
        cgroup.memory_stats().unwrap(),
        CgroupMemoryStats {
            rss: 4096,
            cache: 8192,
            swap: 16,
            usage: 12288,
            max_usage: 20480,
            kernel_usage: 100,
            kernel_max_usage: 200,
        }
    );
    assert_eq!(
        cgroup.cpu_stats().unwrap(),
        CgroupCpuStats {
            total_ns: 3000,
            user_ns: 30_000_000,
            system_ns: 20_000_000,
            throttled_periods: 2,
            throttled_time_ns: 777,
        }
    );
    assert_eq!(cgroup.oom_kill_count().unwrap(), Some(1));
    write(&path("cpuacct/t/cpuacct.usage_user"), "2000\n");
    write(&path("cpuacct/t/cpuacct.usage_sys"), "1000\n");
    let cpu = cgroup.cpu_stats().unwrap();
    assert_eq!((cpu.user_ns, cpu.system_ns), (2000, 1000));
}

/// The real kernel, when this runs as root on a host with cgroups; otherwise says why it
/// did nothing (or, under `CI=true`, fails).
fn real_root() -> Option<&'static Path> {
    let root = Path::new("/sys/fs/cgroup");
    crate::root_tests::root_test_may_run(
        "a cgroup filesystem at /sys/fs/cgroup",
        detect_mode(root).is_ok(),
    )
    .then_some(root)
}

/// A shell that, once released through its stdin, forks a child and a grandchild, all ignoring
/// SIGTERM. Released only after it has been moved into the cgroup, so the whole tree is inside.
fn spawn_tree_ignoring_term() -> Child {
    Command::new("sh")
        .arg("-c")
        .arg("trap '' TERM; read go; sh -c \"trap '' TERM; sleep 600\" & sleep 600; wait")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn release(child: &mut Child) {
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
}

#[test]
fn real_cgroup_holds_a_tree_measures_it_and_kills_it_whole() {
    let Some(root) = real_root() else { return };
    let name = format!("drover-test/isolate-{}", std::process::id());
    let cgroup = TaskCgroup::open(root, &name).unwrap();
    cgroup
        .create(&CgroupLimits {
            memory_hard_bytes: Some(256 << 20),
            pids_max: Some(64),
            cpu_shares: Some(512),
            ..CgroupLimits::default()
        })
        .unwrap();
    let mut child = spawn_tree_ignoring_term();
    cgroup.add_pid(child.id() as i32).unwrap();
    release(&mut child);
    // The grandchildren forked after the move land in the cgroup as well. Wait until the tree
    // has stopped growing (3 or 4 processes, depending on whether the inner shell execs its
    // last command) before counting it.
    let started = Instant::now();
    let mut stable_since = Instant::now();
    let mut last_count = 0;
    loop {
        let count = cgroup.pids().unwrap().len();
        if count != last_count {
            last_count = count;
            stable_since = Instant::now();
        }
        let settled = count >= 3 && stable_since.elapsed() >= Duration::from_millis(300);
        if settled || started.elapsed() > Duration::from_secs(10) {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let pids = cgroup.pids().unwrap();
    assert!(pids.len() >= 3, "tree not in cgroup: {pids:?}");
    assert!(pids.contains(&(child.id() as i32)));
    assert!(cgroup.memory_stats().unwrap().usage > 0);
    assert_eq!(cgroup.oom_kill_count().unwrap(), Some(0));

    cgroup.signal_all(Signal::SIGTERM).unwrap();
    thread::sleep(Duration::from_millis(50));
    assert_eq!(cgroup.pids().unwrap().len(), pids.len(), "TERM is ignored");

    cgroup.kill_all(Duration::from_secs(10)).unwrap();
    assert!(cgroup.pids().unwrap().is_empty());
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    cgroup.remove().unwrap();
    assert!(!cgroup.exists());
}

#[test]
fn real_cgroup_kill_without_cgroup_kill_file_uses_the_freezer() {
    let Some(root) = real_root() else { return };
    if detect_mode(root).unwrap() != (CgroupMode::V1 { unified: true })
        && detect_mode(root).unwrap() != (CgroupMode::V1 { unified: false })
    {
        eprintln!("skipping: the freezer path is v1");
        return;
    }
    let name = format!("drover-test/freezer-{}", std::process::id());
    let mut cgroup = TaskCgroup::open(root, &name).unwrap();
    // Drop the unified directory so the freezer loop is what kills.
    cgroup.dirs.retain(|dir| dir.kind != "unified");
    cgroup.create(&CgroupLimits::default()).unwrap();
    let mut child = spawn_tree_ignoring_term();
    cgroup.add_pid(child.id() as i32).unwrap();
    release(&mut child);
    let started = Instant::now();
    while cgroup.pids().unwrap().len() < 3 && started.elapsed() < Duration::from_secs(10) {
        thread::sleep(Duration::from_millis(10));
    }
    assert!(cgroup.pids().unwrap().len() >= 3);
    cgroup.kill_all(Duration::from_secs(10)).unwrap();
    assert!(cgroup.pids().unwrap().is_empty());
    child.wait().unwrap();
    let freezer_state = root.join("freezer").join(&name).join("freezer.state");
    assert_eq!(read(&freezer_state).trim(), "THAWED");
    cgroup.remove().unwrap();
}

#[test]
fn real_cgroup2_tree_without_controllers_still_holds_kills_and_counts_cpu() {
    // On a hybrid host the controller-less cgroup2 tree at /sys/fs/cgroup/unified is a real v2
    // hierarchy; on a pure v2 host /sys/fs/cgroup is.
    let Some(root) = real_root() else { return };
    let v2_root = match detect_mode(root).unwrap() {
        CgroupMode::V2 => root.to_path_buf(),
        CgroupMode::V1 { unified: true } => root.join("unified"),
        CgroupMode::V1 { unified: false } => {
            eprintln!("skipping: no cgroup2 hierarchy on this host");
            return;
        }
    };
    let name = format!("drover-test/v2-{}", std::process::id());
    let cgroup = TaskCgroup::open(&v2_root, &name).unwrap();
    assert_eq!(cgroup.mode(), CgroupMode::V2);
    cgroup.create(&CgroupLimits::default()).unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("read go; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 600 & wait")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    cgroup.add_pid(child.id() as i32).unwrap();
    release(&mut child);
    let started = Instant::now();
    while cgroup.pids().unwrap().len() < 2 && started.elapsed() < Duration::from_secs(20) {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(cgroup.pids().unwrap().len(), 2);
    assert!(
        cgroup.cpu_stats().unwrap().total_ns > 0,
        "the busy loop was counted"
    );
    cgroup.kill_all(Duration::from_secs(10)).unwrap();
    assert!(cgroup.pids().unwrap().is_empty());
    child.wait().unwrap();
    cgroup.remove().unwrap();
    assert!(!cgroup.exists());
}

#[test]
fn v1_reserved_cpus_replace_the_seeded_ones_and_mems_come_from_the_parent() {
    let root = fake_v1_root(false);
    let cgroup = TaskCgroup::open(root.path(), "drover/a1.web").unwrap();
    cgroup
        .create(&CgroupLimits {
            pids_max: Some(32),
            cpuset_cpus: Some("1".into()),
            ..CgroupLimits::default()
        })
        .unwrap();
    let path = |rest: &str| root.path().join(rest);
    assert_eq!(read(&path("cpuset/drover/a1.web/cpuset.cpus")), "1");
    assert_eq!(read(&path("cpuset/drover/a1.web/cpuset.mems")), "0");
    assert_eq!(
        read(&path("cpuset/drover/cpuset.cpus")),
        "0-1",
        "the shared parent keeps every cpu"
    );
    assert_eq!(read(&path("pids/drover/a1.web/pids.max")), "32");
}

#[test]
fn v2_without_limits_writes_no_cpuset_or_pids_file() {
    let root = fake_v2_root();
    let cgroup = TaskCgroup::open(root.path(), "drover/a2.web").unwrap();
    cgroup.create(&CgroupLimits::default()).unwrap();
    let leaf = root.path().join("drover/a2.web");
    assert!(leaf.is_dir());
    assert!(!leaf.join("cpuset.cpus").exists());
    assert!(!leaf.join("pids.max").exists());
}

#[test]
fn cpu_lists_round_trip_through_the_kernel_format() {
    assert_eq!(format_cpu_list(&[3, 0, 1, 2, 7, 5, 5]), "0-3,5,7");
    assert_eq!(format_cpu_list(&[1]), "1");
    assert_eq!(format_cpu_list(&[]), "");
    assert_eq!(parse_cpu_list("0-3,5,7\n"), Some(vec![0, 1, 2, 3, 5, 7]));
    assert_eq!(parse_cpu_list(""), Some(vec![]));
    assert_eq!(parse_cpu_list("3-1"), None);
    assert_eq!(parse_cpu_list("a"), None);
    for cpus in [vec![0u16, 2, 3, 4, 9], vec![1], vec![0, 1]] {
        assert_eq!(parse_cpu_list(&format_cpu_list(&cpus)), Some(cpus));
    }
}

#[test]
fn shared_task_cgroups_get_the_cpus_no_reserved_task_holds() {
    let root = fake_v1_root(false);
    write(&root.path().join("cpuset/cpuset.cpus"), "0-3\n");
    let create = |name: &str, cpus: Option<&str>| {
        TaskCgroup::open(root.path(), name)
            .unwrap()
            .create(&CgroupLimits {
                cpuset_cpus: cpus.map(str::to_string),
                ..CgroupLimits::default()
            })
            .unwrap();
    };
    create("drover/a1.web", None);
    create("drover/a2.web", None);
    create("drover/reserved/a3.db", Some("1"));
    create("drover/reserved/a4.db", Some("3"));
    create("drover/reserved/gone.db", Some("0"));
    let occupy = |name: &str| {
        write(
            &root
                .path()
                .join("cpuset/drover/reserved")
                .join(name)
                .join("cgroup.procs"),
            "4242\n",
        );
    };
    occupy("a3.db");
    occupy("a4.db");
    // gone.db: its task has exited and left an empty cgroup, which holds no cpu.
    let cpus = |name: &str| {
        read(
            &root
                .path()
                .join("cpuset/drover")
                .join(name)
                .join("cpuset.cpus"),
        )
    };
    assert_eq!(cpus("a1.web"), "0-3", "created with the parent's cpus");

    assert_eq!(
        shared_cpus(root.path(), "drover").unwrap(),
        Some(vec![0, 2])
    );
    assert_eq!(
        rebalance_shared_cpus(root.path(), "drover").unwrap(),
        Some(vec![0, 2])
    );
    assert_eq!(cpus("a1.web"), "0,2");
    assert_eq!(cpus("a2.web"), "0,2");
    assert_eq!(cpus("reserved/a3.db"), "1", "reserved cpus are left alone");
    assert_eq!(cpus("reserved/a4.db"), "3");

    // A reservation ends: its cpu is shared again.
    TaskCgroup::open(root.path(), "drover/reserved/a3.db")
        .unwrap()
        .remove()
        .unwrap();
    rebalance_shared_cpus(root.path(), "drover").unwrap();
    assert_eq!(cpus("a1.web"), "0-2");

    // Every cpu reserved: the shared tasks keep all of them rather than an empty cpuset.
    create("drover/reserved/a5.db", Some("0-2"));
    occupy("a5.db");
    rebalance_shared_cpus(root.path(), "drover").unwrap();
    assert_eq!(cpus("a2.web"), "0-3");

    // No parent yet, or no cpuset controller: nothing to share.
    assert_eq!(shared_cpus(root.path(), "elsewhere").unwrap(), None);
    let v2 = fake_v2_root();
    assert_eq!(rebalance_shared_cpus(v2.path(), "drover").unwrap(), None);
}

#[test]
fn on_v2_the_parents_effective_cpus_are_shared() {
    let root = fake_v2_root();
    let shared = TaskCgroup::open(root.path(), "drover/a1.web").unwrap();
    shared.create(&CgroupLimits::default()).unwrap();
    let reserved = TaskCgroup::open(root.path(), "drover/reserved/a2.db").unwrap();
    reserved
        .create(&CgroupLimits {
            cpuset_cpus: Some("0".into()),
            ..CgroupLimits::default()
        })
        .unwrap();
    write(
        &root.path().join("drover/reserved/a2.db/cgroup.procs"),
        "4242\n",
    );
    // The kernel's view: the parent inherits (empty cpuset.cpus), effective lists its cpus.
    write(&root.path().join("drover/cpuset.cpus"), "\n");
    write(&root.path().join("drover/cpuset.cpus.effective"), "0-1\n");
    write(&root.path().join("drover/a1.web/cpuset.cpus"), "\n");
    assert_eq!(
        rebalance_shared_cpus(root.path(), "drover").unwrap(),
        Some(vec![1])
    );
    assert_eq!(read(&root.path().join("drover/a1.web/cpuset.cpus")), "1");
}
