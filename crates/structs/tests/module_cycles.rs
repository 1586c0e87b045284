//! No two modules of one workspace crate import each other, directly or round a longer loop.
//!
//! Every `src/` under `crates/` is read as text: each file is a module (`a/b.rs` and
//! `a/b/mod.rs` are `a::b`, `lib.rs` the crate root), inline modules count as the file that
//! holds them, and every `use` of `crate::`, `super::`, `self::` or a child module, and every
//! `crate::`/`super::` path in code, is an edge to the module that defines the item. A name the
//! target re-exports (`pub use x::Y`) is followed to where it comes from, so importing through
//! a façade counts as importing the module behind it. The test fails with every cycle, by
//! module name.
//!
//! It lives here because this crate builds first and fastest; it checks the whole workspace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModulePath = Vec<String>;

/// Source text without comments, string literals and char literals.
fn strip(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && at(i + 1) == '*' {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && at(i + 1) == '/') {
                i += 1;
            }
            i += 2;
            continue;
        }
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if (c == 'r' || c == 'b') && !ident_before {
            // r"…", r#"…"#, br"…"
            let mut j = i + 1;
            if c == 'b' && at(j) == 'r' {
                j += 1;
            }
            if c == 'r' || at(i + 1) == 'r' {
                let mut hashes = 0;
                while at(j) == '#' {
                    hashes += 1;
                    j += 1;
                }
                if at(j) == '"' {
                    j += 1;
                    loop {
                        if j >= chars.len() {
                            break;
                        }
                        if chars[j] == '"' && (0..hashes).all(|k| at(j + 1 + k) == '#') {
                            j += 1 + hashes;
                            break;
                        }
                        j += 1;
                    }
                    out.push_str("\"\"");
                    i = j;
                    continue;
                }
            }
        }
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        if c == '\'' {
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                continue;
            }
            if at(i + 2) == '\'' {
                i += 3;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push("::".to_string());
            i += 2;
        } else {
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
            i += 1;
        }
    }
    tokens
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// The paths of one `use` tree starting at `tokens[*at]`, each with its last segment.
fn use_tree(tokens: &[String], at: &mut usize, prefix: &[String], out: &mut Vec<ModulePath>) {
    let mut path = prefix.to_vec();
    loop {
        let Some(token) = tokens.get(*at) else { return };
        match token.as_str() {
            "{" => {
                *at += 1;
                loop {
                    match tokens.get(*at).map(String::as_str) {
                        Some("}") => {
                            *at += 1;
                            return;
                        }
                        Some(",") => *at += 1,
                        None => return,
                        Some(_) => use_tree(tokens, at, &path, out),
                    }
                }
            }
            "*" => {
                *at += 1;
                out.push(path);
                return;
            }
            "::" => *at += 1,
            "as" => {
                *at += 2;
                out.push(path);
                return;
            }
            "," | "}" | ";" => {
                out.push(path);
                return;
            }
            _ if is_ident(token) => {
                path.push(token.clone());
                *at += 1;
            }
            _ => {
                *at += 1;
            }
        }
    }
}

/// One module file's imports: paths as written, each with the inline module it appears in.
struct Imports {
    /// (inline module path below the file module, is a `use`, path as written)
    paths: Vec<(ModulePath, bool, ModulePath)>,
    /// `pub use` re-exports: name → path as written.
    reexports: Vec<(String, ModulePath)>,
}

fn imports(code: &str) -> Imports {
    let tokens = tokens(code);
    let mut paths = Vec::new();
    let mut reexports = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i].as_str();
        match token {
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|(_, at)| *at == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if tokens.get(i + 2).map(String::as_str) == Some("{") => {
                inline.push((tokens[i + 1].clone(), depth + 1));
            }
            "use" => {
                let public = i > 0 && (tokens[i - 1] == "pub" || tokens[i - 1] == ")");
                let mut at = i + 1;
                let mut found = Vec::new();
                use_tree(&tokens, &mut at, &[], &mut found);
                let within: ModulePath = inline.iter().map(|(name, _)| name.clone()).collect();
                for path in found {
                    if public && let Some(name) = path.last() {
                        reexports.push((name.clone(), path.clone()));
                    }
                    paths.push((within.clone(), true, path));
                }
                i = at;
                continue;
            }
            "crate" | "super"
                if tokens.get(i + 1).map(String::as_str) == Some("::")
                    && (i == 0 || tokens[i - 1] != "::") =>
            {
                let mut path = vec![token.to_string()];
                let mut at = i + 1;
                while tokens.get(at).map(String::as_str) == Some("::")
                    && tokens.get(at + 1).is_some_and(|next| is_ident(next))
                {
                    path.push(tokens[at + 1].clone());
                    at += 2;
                }
                let within: ModulePath = inline.iter().map(|(name, _)| name.clone()).collect();
                paths.push((within, false, path));
                i = at;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Imports { paths, reexports }
}

/// The module a source file is, relative to `src`; `None` for files of other crate roots.
fn module_of(src: &Path, file: &Path) -> Option<ModulePath> {
    let relative = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if parts.first().map(String::as_str) == Some("bin") {
        return None;
    }
    let last = parts.pop()?;
    match last.as_str() {
        "lib.rs" if parts.is_empty() => {}
        "main.rs" if parts.is_empty() => return None,
        "mod.rs" => {}
        name => parts.push(name.strip_suffix(".rs")?.to_string()),
    }
    Some(parts)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

struct Crate {
    imports: BTreeMap<ModulePath, Imports>,
}

impl Crate {
    fn read(src: &Path) -> Self {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        let mut imports = BTreeMap::new();
        for file in files {
            let Some(module) = module_of(src, &file) else {
                continue;
            };
            let source = std::fs::read_to_string(&file)
                .unwrap_or_else(|error| panic!("reading {}: {error}", file.display()));
            imports.insert(module, self::imports(&strip(&source)));
        }
        Crate { imports }
    }

    /// The module `path` (written in module `from`) names, following re-exports.
    fn resolve(&self, from: &[String], path: &[String], is_use: bool, hops: usize) -> ModulePath {
        let mut base: ModulePath;
        let mut rest = path;
        match path.first().map(String::as_str) {
            Some("crate") => {
                base = Vec::new();
                rest = &path[1..];
            }
            Some("self") => {
                base = from.to_vec();
                rest = &path[1..];
            }
            Some("super") => {
                base = from.to_vec();
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            Some(first) if is_use => {
                let mut child = from.to_vec();
                child.push(first.to_string());
                if !self.imports.contains_key(&child) {
                    return from.to_vec();
                }
                base = from.to_vec();
            }
            _ => return from.to_vec(),
        }
        let mut module = base;
        let mut consumed = 0;
        for segment in rest {
            let mut deeper = module.clone();
            deeper.push(segment.clone());
            if self.imports.contains_key(&deeper) {
                module = deeper;
                consumed += 1;
            } else {
                break;
            }
        }
        if hops < 8
            && let Some(name) = rest.get(consumed)
            && let Some(imports) = self.imports.get(&module)
            && let Some((_, target)) = imports.reexports.iter().find(|(alias, _)| alias == name)
        {
            return self.resolve(&module, target, true, hops + 1);
        }
        module
    }

    fn graph(&self) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
        let mut graph: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
        for (module, imports) in &self.imports {
            for (within, is_use, path) in &imports.paths {
                let mut from = module.clone();
                from.extend(within.iter().cloned());
                let target = self.resolve(&from, path, *is_use, 0);
                if &target != module {
                    graph.entry(module.clone()).or_default().insert(target);
                }
            }
        }
        graph
    }
}

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// Every cycle's modules, one list per strongly connected component of more than one module.
fn cycles(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<String>> {
    let reaches = |from: &ModulePath| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(module) = stack.pop() {
            for next in graph.get(&module).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&ModulePath, BTreeSet<ModulePath>> = graph
        .keys()
        .map(|module| (module, reaches(module)))
        .collect();
    let mut done = BTreeSet::new();
    let mut found = Vec::new();
    for (module, reached) in &reach {
        if done.contains(*module) || !reached.contains(*module) {
            continue;
        }
        let component: Vec<&ModulePath> = reached
            .iter()
            .filter(|other| reach.get(other).is_some_and(|back| back.contains(*module)))
            .collect();
        for member in &component {
            done.insert((*member).clone());
        }
        found.push(component.into_iter().map(|module| name(module)).collect());
    }
    found
}

/// Cycles that are known and not yet broken, as the test reports them. The test fails when a
/// cycle not listed here appears, and when a listed one is gone (so the list only shrinks).
const KNOWN_CYCLES: &[&str] = &[];

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    let crates_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut crate_dirs: Vec<PathBuf> = std::fs::read_dir(&crates_dir)
        .unwrap_or_else(|error| panic!("listing {}: {error}", crates_dir.display()))
        .flatten()
        .map(|entry| entry.path())
        .filter(|dir| dir.join("src").is_dir())
        // A forked crate (its `UPSTREAM.md` names the origin) keeps upstream's module layout,
        // so fixes can be compared with upstream; the rule is drover's own code.
        .filter(|dir| !dir.join("UPSTREAM.md").exists())
        .collect();
    crate_dirs.sort();
    assert!(crate_dirs.len() > 5, "the workspace's crates are found");
    let mut found = Vec::new();
    for dir in crate_dirs {
        let crate_name = dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        for cycle in cycles(&Crate::read(&dir.join("src")).graph()) {
            found.push(format!("{crate_name}: {}", cycle.join(" <-> ")));
        }
    }
    let new: Vec<&String> = found
        .iter()
        .filter(|cycle| !KNOWN_CYCLES.contains(&cycle.as_str()))
        .collect();
    let gone: Vec<&&str> = KNOWN_CYCLES
        .iter()
        .filter(|known| !found.iter().any(|cycle| cycle == *known))
        .collect();
    assert!(
        new.is_empty(),
        "modules that import each other:\n{}",
        new.iter()
            .map(|cycle| cycle.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        gone.is_empty(),
        "cycles broken since; take them off KNOWN_CYCLES: {gone:?}"
    );
}

#[test]
fn the_reader_finds_a_cycle_through_uses_paths_and_reexports() {
    let dir = std::env::temp_dir().join(format!("module-cycles-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap_or_else(|error| panic!("{error}"));
    let write = |path: &str, text: &str| {
        std::fs::write(src.join(path), text).unwrap_or_else(|error| panic!("{error}"))
    };
    write("lib.rs", "mod a; mod b; mod c; pub use b::Thing;\n");
    // a/mod.rs re-exports its child; b names it through the façade; a's child names b in code.
    write("a/mod.rs", "mod inner;\npub use inner::Inner;\n");
    write(
        "a/inner.rs",
        "// use crate::c::Nope;\nconst S: &str = \"crate::c::X\";\nfn f() { crate::b::g(); }\n",
    );
    write("b.rs", "use crate::a::{Inner as I};\npub struct Thing;\n");
    write(
        "c.rs",
        "use crate::Thing;\n#[cfg(test)]\nmod tests { use super::*; }\n",
    );
    let graph = Crate::read(&src).graph();
    let _ = std::fs::remove_dir_all(&dir);
    let edge = |from: &str, to: &str| {
        let from: ModulePath = from.split("::").map(str::to_string).collect();
        let to: ModulePath = to.split("::").map(str::to_string).collect();
        graph
            .get(&from)
            .is_some_and(|targets| targets.contains(&to))
    };
    assert!(edge("a::inner", "b"), "a path in code: {graph:?}");
    assert!(
        edge("b", "a::inner"),
        "a use through a re-export: {graph:?}"
    );
    assert!(
        edge("c", "b"),
        "the crate root's re-export is followed: {graph:?}"
    );
    assert!(!edge("a::inner", "c"), "comments and strings are not read");
    assert_eq!(
        cycles(&graph),
        vec![vec!["a::inner".to_string(), "b".to_string()]]
    );
}

/// The graph of the modules directly under `src/`: an edge wherever any module inside one
/// names a module inside another. The crate root and `error` modules are left out (every
/// module may use its subsystem's error, and the root only declares and re-exports).
fn top_level(
    graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>,
) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let top = |module: &ModulePath| -> Option<ModulePath> {
        let first = module.first()?;
        (first != "error").then(|| vec![first.clone()])
    };
    let mut out: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (from, targets) in graph {
        let Some(from) = top(from) else { continue };
        for target in targets {
            if let Some(target) = top(target)
                && target != from
            {
                out.entry(from.clone()).or_default().insert(target);
            }
        }
    }
    out
}

/// The modules directly under `src/` (the crate root and `error` aside).
fn top_modules(krate: &Crate) -> BTreeSet<String> {
    krate
        .imports
        .keys()
        .filter_map(|module| module.first())
        .filter(|first| *first != "error")
        .cloned()
        .collect()
}

/// The layers `lib.rs` (or `main.rs`) states under its `# Layers` heading, top first: each
/// `//! - `module`, `module`` line is one layer.
fn stated_layers(src: &Path) -> Option<Vec<Vec<String>>> {
    let root = ["lib.rs", "main.rs"]
        .iter()
        .map(|file| src.join(file))
        .find(|file| file.exists())?;
    let text = std::fs::read_to_string(&root).ok()?;
    let mut lines = text.lines().take_while(|line| line.starts_with("//!"));
    lines.find(|line| line.trim() == "//! # Layers")?;
    let names = |line: &str| -> Vec<String> {
        line.split(',')
            .filter_map(|name| {
                let name = name.trim();
                name.strip_prefix('`')?
                    .strip_suffix('`')
                    .map(str::to_string)
            })
            .collect()
    };
    let mut layers: Vec<Vec<String>> = Vec::new();
    for line in lines.map(|line| line.trim_start_matches("//!")) {
        if line.trim_start().starts_with('#') {
            break;
        }
        if let Some(first) = line.strip_prefix(" - ") {
            layers.push(names(first));
        } else if let Some(more) = line.strip_prefix("   `")
            && let Some(layer) = layers.last_mut()
        {
            // A layer too long for one line goes on, indented, on the next.
            layer.extend(names(&format!("`{more}")));
        }
    }
    Some(layers)
}

/// A layering that fits `graph`: a module's layer is one above the highest it uses.
fn suggested_layers(
    modules: &BTreeSet<String>,
    graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>,
) -> Vec<Vec<String>> {
    let mut level: BTreeMap<&String, usize> = modules.iter().map(|m| (m, 0)).collect();
    // Longest path from the bottom; the graph has no cycle when this is asked, so it settles
    // within as many rounds as there are modules.
    for _ in 0..modules.len() {
        for module in modules {
            let above = graph
                .get(&vec![module.clone()])
                .into_iter()
                .flatten()
                .filter_map(|target| target.first())
                .filter_map(|target| level.get(target).map(|l| l + 1))
                .max()
                .unwrap_or(0);
            level.insert(module, above);
        }
    }
    let top = level.values().copied().max().unwrap_or(0);
    (0..=top)
        .rev()
        .map(|l| {
            level
                .iter()
                .filter(|(_, at)| **at == l)
                .map(|(m, _)| (*m).clone())
                .collect()
        })
        .collect()
}

fn render_layers(layers: &[Vec<String>]) -> String {
    layers
        .iter()
        .map(|layer| {
            let names: Vec<String> = layer.iter().map(|m| format!("`{m}`")).collect();
            let mut lines: Vec<String> = Vec::new();
            let mut current = String::from("//! -");
            for (index, name) in names.iter().enumerate() {
                let piece = if index + 1 < names.len() {
                    format!("{name},")
                } else {
                    name.clone()
                };
                if index > 0 && current.len() + 1 + piece.len() > 100 {
                    lines.push(std::mem::replace(&mut current, String::from("//!  ")));
                }
                current.push(' ');
                current.push_str(&piece);
            }
            lines.push(current);
            lines.join("\n")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_modules_of_every_crate_form_the_layers_its_root_states() {
    let crates_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut crate_dirs: Vec<PathBuf> = std::fs::read_dir(&crates_dir)
        .unwrap_or_else(|error| panic!("listing {}: {error}", crates_dir.display()))
        .flatten()
        .map(|entry| entry.path())
        .filter(|dir| dir.join("src").is_dir())
        .filter(|dir| !dir.join("UPSTREAM.md").exists())
        .collect();
    crate_dirs.sort();
    let mut problems = Vec::new();
    for dir in crate_dirs {
        let crate_name = dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let krate = Crate::read(&dir.join("src"));
        let graph = top_level(&krate.graph());
        let modules = top_modules(&krate);
        if modules.len() < 2 {
            continue;
        }
        let cycles = cycles(&graph);
        if !cycles.is_empty() {
            for cycle in cycles {
                problems.push(format!("{crate_name}: a cycle: {}", cycle.join(" <-> ")));
            }
            continue;
        }
        let suggestion = render_layers(&suggested_layers(&modules, &graph));
        let Some(layers) = stated_layers(&dir.join("src")) else {
            problems.push(format!(
                "{crate_name}: its root states no `# Layers`; one that fits:\n//! # Layers\n//!\n{suggestion}"
            ));
            continue;
        };
        let at: BTreeMap<&String, usize> = layers
            .iter()
            .enumerate()
            .flat_map(|(index, layer)| layer.iter().map(move |m| (m, index)))
            .collect();
        let mut wrong = Vec::new();
        for module in &modules {
            if !at.contains_key(module) {
                wrong.push(format!("`{module}` is in no layer"));
            }
        }
        for stated in at.keys() {
            if !modules.contains(*stated) {
                wrong.push(format!("`{stated}` is not a module"));
            }
        }
        for (from, targets) in &graph {
            for target in targets {
                let (Some(from), Some(target)) = (from.first(), target.first()) else {
                    continue;
                };
                if let (Some(a), Some(b)) = (at.get(from), at.get(target))
                    && a >= b
                {
                    wrong.push(format!("`{from}` uses `{target}`, which is not below it"));
                }
            }
        }
        if !wrong.is_empty() {
            problems.push(format!(
                "{crate_name}: {}; a layering that fits:\n{suggestion}",
                wrong.join("; ")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}
