//! No two source files of the crate refer to each other: a module names another through a
//! `crate::` or `super::` path, and the test fails for every pair that name each other.
//!
//! Each file under `src` is a module (`src/bus/pci.rs` is `bus::pci`, `src/workload/net/mod.rs`
//! is `workload::net`, `src/lib.rs` the crate root). A path names the longest module it starts
//! with; a name that a module re-exports with `pub use` (such as `crate::dma::DmaMapper`, from
//! `dma::mapper`) counts for the module it comes from. Comments and string literals are skipped,
//! and a file naming itself (its own `mod tests` with `use super::*`) does not count, but its
//! unit tests naming another file do. Paths written without `crate::` or `super::` (a parent's
//! `use events::Ev` in `workload/net/mod.rs`, `self::mapper::...` in `dma/mod.rs`) are not
//! counted: a parent naming its children is how modules are declared.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Two-file circles allowed for now (none: keep it empty). Each pair listed must still be a
/// circle (the test fails otherwise), so that the list cannot outlive its reason.
const ALLOWED_CIRCLES: &[(&str, &str)] = &[];

/// A module's path from the crate root, one name per segment (empty: the root).
type Module = Vec<String>;

/// Where one file names another: the line and the path as written.
type Evidence = (usize, String);

/// A lexical token of the source, comments and literals removed, with its line.
#[derive(Clone, Debug, PartialEq)]
struct Token {
    text: String,
    line: usize,
}

/// The source's identifiers, `::` and single punctuation characters, in order; comments,
/// string, byte-string and character literals are dropped, lifetimes kept as `'` and a name.
fn tokens(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if (ch == 'r' || (ch == 'b' && at(i + 1) == 'r'))
            && matches!(at(i + 1 + usize::from(ch == 'b')), '"' | '#')
            && {
                // A raw string: r"..." or r#"..."#, possibly byte (br).
                let mut k = i + 1 + usize::from(ch == 'b');
                while at(k) == '#' {
                    k += 1;
                }
                at(k) == '"'
            }
        {
            let mut k = i + 1 + usize::from(ch == 'b');
            let mut hashes = 0;
            while at(k) == '#' {
                hashes += 1;
                k += 1;
            }
            k += 1;
            loop {
                if k >= c.len() {
                    break;
                }
                if c[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#') {
                    k += 1 + hashes;
                    break;
                }
                line += usize::from(c[k] == '\n');
                k += 1;
            }
            i = k;
        } else if ch == '"' || (ch == 'b' && at(i + 1) == '"') {
            let mut k = i + if ch == 'b' { 2 } else { 1 };
            while k < c.len() && c[k] != '"' {
                if c[k] == '\\' {
                    k += 1;
                }
                line += usize::from(at(k) == '\n');
                k += 1;
            }
            i = k + 1;
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            let q = i + usize::from(ch == 'b');
            if at(q + 1) == '\\' {
                // An escaped character literal: '\n', '\'', '\u{..}'.
                let mut k = q + 3;
                while k < c.len() && c[k] != '\'' {
                    k += 1;
                }
                i = k + 1;
            } else if at(q + 2) == '\'' {
                i = q + 3;
            } else if ch == 'b' {
                out.push(Token {
                    text: "b".into(),
                    line,
                });
                i += 1;
            } else {
                out.push(Token {
                    text: "'".into(),
                    line,
                });
                i += 1;
            }
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Token {
                text: c[start..i].iter().collect(),
                line,
            });
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                text: ch.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// One path of a use tree or an inline path: its segments as written, and the name it is
/// bound to (the last segment, or an `as` alias; `None` for a glob).
#[derive(Clone, Debug, PartialEq)]
struct Leaf {
    segments: Vec<String>,
    name: Option<String>,
}

/// Parse a path or use tree starting at `toks[*i]`, below `prefix`; leave `*i` after it.
fn parse_tree(toks: &[Token], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Leaf>) {
    let mut segments = prefix;
    loop {
        let Some(t) = toks.get(*i) else {
            out.push(Leaf {
                name: segments.last().cloned(),
                segments,
            });
            return;
        };
        match t.text.as_str() {
            "{" => {
                *i += 1;
                while toks.get(*i).is_some_and(|t| t.text != "}") {
                    parse_tree(toks, i, segments.clone(), out);
                    if toks.get(*i).is_some_and(|t| t.text == ",") {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            "*" => {
                *i += 1;
                out.push(Leaf {
                    segments,
                    name: None,
                });
                return;
            }
            s if is_ident(s) => {
                *i += 1;
                if s != "self" || segments.is_empty() {
                    segments.push(s.to_string());
                }
                if toks.get(*i).is_some_and(|t| t.text == "::") {
                    *i += 1;
                    continue;
                }
                let mut name = segments.last().cloned();
                if toks.get(*i).is_some_and(|t| t.text == "as") {
                    name = toks.get(*i + 1).map(|t| t.text.clone());
                    *i += 2;
                }
                out.push(Leaf { segments, name });
                return;
            }
            _ => {
                out.push(Leaf {
                    name: segments.last().cloned(),
                    segments,
                });
                return;
            }
        }
    }
}

/// The absolute module path `segments` (as written in `scope`) stands for: `crate::` from the
/// root, each leading `super::` one level up and, with `bare` (for re-exports), `self::` and a
/// plain name from `scope`. `None` for other paths (`std::`, or without `bare`, `self::`).
fn absolute(segments: &[String], scope: &[String], bare: bool) -> Option<Vec<String>> {
    let first = segments.first()?;
    let (mut base, rest) = match first.as_str() {
        "crate" => (Vec::new(), &segments[1..]),
        "super" => {
            let mut base = scope.to_vec();
            let mut k = 0;
            while segments.get(k).is_some_and(|s| s == "super") {
                base.pop()?;
                k += 1;
            }
            (base, &segments[k..])
        }
        "self" if bare => (scope.to_vec(), &segments[1..]),
        _ if bare => (scope.to_vec(), segments),
        _ => return None,
    };
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// What one file says: its module, the paths it names (line, text, absolute path) and its
/// re-exports (name, absolute path of what it re-exports).
struct FileRefs {
    module: Module,
    paths: Vec<(usize, String, Vec<String>)>,
    reexports: Vec<(String, Vec<String>)>,
}

fn scan(module: Module, src: &str) -> FileRefs {
    let toks = tokens(src);
    let mut refs = FileRefs {
        module: module.clone(),
        paths: Vec::new(),
        reexports: Vec::new(),
    };
    // Inline modules open at this point (`mod tests {`), with the brace depth they close at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i].text.as_str();
        let prev = |k: usize| i.checked_sub(k).map(|p| toks[p].text.as_str());
        let scope: Vec<String> = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        let written = |leaf: &Leaf| leaf.segments.join("::");
        if t == "use" {
            let line = toks[i].line;
            let public = prev(1) == Some("pub") || (prev(1) == Some(")") && prev(4) == Some("pub"));
            i += 1;
            let mut leaves = Vec::new();
            parse_tree(&toks, &mut i, Vec::new(), &mut leaves);
            for leaf in &leaves {
                if let Some(abs) = absolute(&leaf.segments, &scope, false) {
                    refs.paths.push((line, written(leaf), abs));
                }
                if public && inline.is_empty() {
                    if let (Some(name), Some(abs)) =
                        (&leaf.name, absolute(&leaf.segments, &scope, true))
                    {
                        refs.reexports.push((name.clone(), abs));
                    }
                }
            }
        } else if (t == "crate" || t == "super")
            && toks.get(i + 1).is_some_and(|n| n.text == "::")
            && prev(1) != Some("::")
            && prev(1) != Some("in")
        {
            let line = toks[i].line;
            let mut leaves = Vec::new();
            parse_tree(&toks, &mut i, Vec::new(), &mut leaves);
            for leaf in &leaves {
                if let Some(abs) = absolute(&leaf.segments, &scope, false) {
                    refs.paths.push((line, written(leaf), abs));
                }
            }
        } else if t == "mod"
            && toks.get(i + 1).is_some_and(|n| is_ident(&n.text))
            && toks.get(i + 2).is_some_and(|n| n.text == "{")
        {
            inline.push((toks[i + 1].text.clone(), depth + 1));
            i += 2;
        } else {
            if t == "{" {
                depth += 1;
            } else if t == "}" {
                if inline.last().is_some_and(|&(_, d)| d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            i += 1;
        }
    }
    refs
}

/// The module of a file at `rel` under `src`: `bus/pci.rs` is `bus::pci`, `bus/mod.rs` is
/// `bus`, `lib.rs` the root.
fn module_of(rel: &Path) -> Module {
    let mut m: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = m.pop().unwrap_or_default();
    let stem = last.strip_suffix(".rs").unwrap_or(&last);
    if !matches!(stem, "mod" | "lib" | "main") {
        m.push(stem.to_string());
    }
    m
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The file module a path names: its longest prefix that is a file, following re-exports.
fn resolve(
    path: &[String],
    files: &BTreeSet<Module>,
    reexports: &BTreeMap<(Module, String), Vec<String>>,
    hops: usize,
) -> Module {
    let len = (0..=path.len())
        .rev()
        .find(|&n| files.contains(&path[..n]))
        .unwrap_or(0);
    let module = path[..len].to_vec();
    if let Some(name) = path.get(len) {
        if let Some(target) = reexports.get(&(module.clone(), name.clone())) {
            if hops < 8 {
                let mut next = target.clone();
                next.extend(path[len + 1..].iter().cloned());
                return resolve(&next, files, reexports, hops + 1);
            }
        }
    }
    module
}

/// Every file module and, for each, the other file modules it names with where it names them.
fn module_graph() -> BTreeMap<String, BTreeMap<String, Evidence>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let scanned: Vec<FileRefs> = paths
        .iter()
        .map(|p| {
            let text = fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            scan(module_of(p.strip_prefix(&src).expect("under src")), &text)
        })
        .collect();
    let files: BTreeSet<Module> = scanned.iter().map(|f| f.module.clone()).collect();
    let mut reexports = BTreeMap::new();
    for f in &scanned {
        for (name, target) in &f.reexports {
            reexports.insert((f.module.clone(), name.clone()), target.clone());
        }
    }
    let name = |m: &Module| {
        if m.is_empty() {
            "crate".to_string()
        } else {
            m.join("::")
        }
    };
    let mut graph = BTreeMap::new();
    for f in &scanned {
        let edges: &mut BTreeMap<String, Evidence> = graph.entry(name(&f.module)).or_default();
        for (line, written, abs) in &f.paths {
            let target = resolve(abs, &files, &reexports, 0);
            if target != f.module {
                edges
                    .entry(name(&target))
                    .or_insert_with(|| (*line, written.clone()));
            }
        }
    }
    graph
}

/// Every pair of file modules that name each other, `a < b`, with where each names the other.
fn circles() -> BTreeMap<(String, String), (Evidence, Evidence)> {
    let graph = module_graph();
    let mut found = BTreeMap::new();
    for (a, edges) in &graph {
        for (b, ab) in edges {
            if a < b {
                if let Some(ba) = graph.get(b).and_then(|e| e.get(a)) {
                    found.insert((a.clone(), b.clone()), (ab.clone(), ba.clone()));
                }
            }
        }
    }
    found
}

fn ordered(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

#[test]
fn no_two_files_name_each_other() {
    let found = circles();
    let allowed: BTreeSet<(String, String)> =
        ALLOWED_CIRCLES.iter().map(|(a, b)| ordered(a, b)).collect();
    let mut problems = Vec::new();
    for ((a, b), ((la, pa), (lb, pb))) in &found {
        if !allowed.contains(&(a.clone(), b.clone())) {
            problems.push(format!(
                "{a} <-> {b}: {a} names {pa} (line {la}), {b} names {pb} (line {lb})"
            ));
        }
    }
    for (a, b) in &allowed {
        if !found.contains_key(&(a.clone(), b.clone())) {
            problems.push(format!(
                "{a} <-> {b} is in ALLOWED_CIRCLES but is no longer a circle: remove it there"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "two-file import circles (make each pair point one way):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_graph_sees_direct_paths_and_reexports() {
    // Guards the scan itself: if it found nothing, the circle test would pass vacuously.
    let graph = module_graph();
    let names = |m: &str| graph.get(m).map(|e| e.keys().cloned().collect::<Vec<_>>());
    let host = names("workload::net::host").expect("the net host's file");
    // `use crate::dma::{DmaMapper, ...}` names the mapper's file through dma's re-export.
    assert!(host.contains(&"dma::mapper".to_string()), "{host:?}");
    // `use super::Side` names the parent module's file.
    assert!(host.contains(&"workload::net".to_string()), "{host:?}");
    // `crate::Result` (in `bus/trace.rs`) is lib.rs's re-export of `error::Result`: it names
    // the error module's file, not the root's.
    let trace = names("bus::trace").expect("the trace's file");
    assert!(trace.contains(&"error".to_string()), "{trace:?}");
    assert!(!trace.contains(&"crate".to_string()), "{trace:?}");
    assert!(graph.len() > 40, "{} files", graph.len());
}

#[test]
fn paths_resolve_from_their_files() {
    assert_eq!(module_of(Path::new("bus/pci.rs")), ["bus", "pci"]);
    assert_eq!(
        module_of(Path::new("workload/net/mod.rs")),
        ["workload", "net"]
    );
    assert!(module_of(Path::new("lib.rs")).is_empty());
    let src = "//! crate::a::b in a comment\n\
               use super::{x::Y, z};\n\
               pub use self::m::{N as O, P};\n\
               fn f() { let s = \"crate::s::t\"; let c = '\"'; crate::c::d::e(); }\n\
               mod tests { use super::*; use crate::t::u; }\n";
    let refs = scan(vec!["a".into(), "b".into()], src);
    let abs: Vec<String> = refs.paths.iter().map(|(_, _, p)| p.join("::")).collect();
    assert_eq!(abs, ["a::x::Y", "a::z", "c::d::e", "a::b", "t::u"]);
    let lines: Vec<usize> = refs.paths.iter().map(|(l, _, _)| *l).collect();
    assert_eq!(lines, [2, 2, 4, 5, 5]);
    let re: Vec<(String, String)> = refs
        .reexports
        .iter()
        .map(|(n, p)| (n.clone(), p.join("::")))
        .collect();
    assert_eq!(
        re,
        [
            ("O".to_string(), "a::b::m::N".to_string()),
            ("P".to_string(), "a::b::m::P".to_string())
        ]
    );
}

/// The `.rs` files the crate root may hold: the crate root itself and the event engine's own
/// parts (its clock, slot queue and resources, the units it counts in, the per-run progress
/// handle, the memory a run may plan to use, and the crate's one error type). Everything else
/// lives in the layer it belongs to.
const ROOT_FILES: &[&str] = &[
    "lib.rs",
    "engine.rs",
    "error.rs",
    "units.rs",
    "progress.rs",
    "limits.rs",
    "slots.rs",
    "resource.rs",
];

#[test]
fn the_crate_root_holds_only_engine_level_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stray: Vec<String> = fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("reading {}: {e}", src.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            p.file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| !ROOT_FILES.contains(&name.as_str()))
        .collect();
    stray.sort();
    assert!(
        stray.is_empty(),
        "src/ holds files that are not engine-level: {}. The crate root holds only {}; \
         put each other file in the layer it belongs to (running a scenario and its report in \
         run/, models and what they record in workload/, what a user writes in config/, ...: \
         see docs/ARCHITECTURE.md, \"The simulator's layers\")",
        stray.join(", "),
        ROOT_FILES.join(", ")
    );
}
