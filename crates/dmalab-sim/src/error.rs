//! The one error type of the simulator crate: every variant names the file, field or argument at
//! fault and the valid range, so a user can fix the input without reading the code.

use thiserror::Error;

/// Everything that can go wrong in `dmalab-sim` on user input. Nothing in the crate panics on
/// user input; it returns one of these.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SimError {
    /// A platform or scenario file could not be read.
    #[error("{file}: cannot read: {reason}")]
    FileRead {
        /// The path or built-in name of the file.
        file: String,
        /// What the operating system said.
        reason: String,
    },
    /// A platform or scenario file is not valid TOML.
    #[error("{file}: not valid TOML: {reason}")]
    Syntax {
        /// The path or built-in name of the file.
        file: String,
        /// What the parser said, with the line.
        reason: String,
    },
    /// A required field is missing.
    #[error("{file}: missing field `{field}` (expected {expected})")]
    MissingField {
        /// The path or built-in name of the file.
        file: String,
        /// The dotted path of the field.
        field: String,
        /// What the field should hold.
        expected: String,
    },
    /// A field holds a value of the wrong type or outside its valid range.
    #[error("{file}: field `{field}` is {value}; valid: {valid}")]
    InvalidField {
        /// The path or built-in name of the file.
        file: String,
        /// The dotted path of the field.
        field: String,
        /// The value found, as written.
        value: String,
        /// The valid range or choices.
        valid: String,
    },
    /// A platform file holds a key that no model reads (a misspelling, or a parameter that
    /// belongs elsewhere).
    #[error("{file}: unknown key `{key}`; keys read there: {valid}")]
    UnknownKey {
        /// The path or built-in name of the file.
        file: String,
        /// The dotted path of the key.
        key: String,
        /// The keys read in the same table.
        valid: String,
    },
    /// A platform parameter gives neither a source nor a `fitted`, `assumed` or `inspected`
    /// note.
    #[error(
        "{file}: parameter `{field}` has no provenance: add `source = \"...\"`, \
         `fitted = \"...\"`, `assumed = \"...\"` or `inspected = \"...\"`"
    )]
    MissingProvenance {
        /// The path or built-in name of the file.
        file: String,
        /// The dotted path of the parameter.
        field: String,
    },
    /// No built-in platform has this name and no file exists at this path.
    #[error("unknown platform `{name}`; built-in platforms: {known}")]
    UnknownPlatform {
        /// The name asked for.
        name: String,
        /// The built-in names.
        known: String,
    },
    /// No built-in device has this name and no device file exists at this path.
    #[error("unknown device `{name}`; built-in devices: {known} (or a device file's path)")]
    UnknownDevice {
        /// The name asked for.
        name: String,
        /// The built-in device names.
        known: String,
    },
    /// A platform choice (such as the firmware level) or one of its options is unknown.
    #[error("{file}: unknown {what} `{name}`; valid: {valid}")]
    UnknownChoice {
        /// The path or built-in name of the platform file.
        file: String,
        /// `choice` or `option of <choice>`.
        what: String,
        /// The name asked for.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// An argument of a model call (an address, a length, a device) is outside its valid range.
    #[error("{field} is {value}; valid: {valid}")]
    InvalidArgument {
        /// The argument's name.
        field: String,
        /// The value given.
        value: String,
        /// The valid range or choices.
        valid: String,
    },
    /// The platform lacks a section that the asked-for model needs.
    #[error("platform `{platform}` does not describe {what}")]
    NotDescribed {
        /// The platform's name.
        platform: String,
        /// The missing part, such as `a NIC` or `a PCIe link`.
        what: String,
    },
    /// A scenario field is missing, of the wrong type or outside its valid range.
    #[error("{file}: scenario field `{field}` is {value}; valid: {valid}")]
    InvalidScenario {
        /// The scenario's file or name.
        file: String,
        /// The dotted path of the field.
        field: String,
        /// The value found (or `missing`).
        value: String,
        /// The valid range or choices.
        valid: String,
    },
    /// A scenario key is unknown or holds a value of the wrong type.
    #[error("{file}: scenario key `{key}`: {reason}")]
    ScenarioSchema {
        /// The scenario's file or name.
        file: String,
        /// The dotted path of the key (or of the table holding an unknown key).
        key: String,
        /// What the reader said: the unknown key and the valid ones, or the type expected.
        reason: String,
    },
    /// The IOVA allocator inside a run refused an operation (no space below the DMA mask, a
    /// reserved range that overlaps, a domain it cannot manage).
    #[error("{operation}: {source}")]
    Iova {
        /// What the mapping layer asked, such as `IOVA allocation of 16 pages`.
        operation: String,
        /// The allocator's own error.
        #[source]
        source: dmalab_iova::IovaError,
    },
    /// A run would need more memory than the machine (or `--max-memory`) allows.
    #[error(
        "needs about {need} of memory, more than the {available} available ({limit_from}); \
         lower {lower}"
    )]
    Memory {
        /// The estimate, readable.
        need: String,
        /// What may be used, readable.
        available: String,
        /// Where the limit comes from.
        limit_from: &'static str,
        /// The inputs that set the need.
        lower: String,
    },
    /// A run was asked to stop (a user's Ctrl-C) before it finished.
    #[error("interrupted after {done} of {total} operations")]
    Interrupted {
        /// Operations finished when it stopped.
        done: u64,
        /// Operations the run was to do (0 where not known ahead).
        total: u64,
    },
    /// No claim has this id.
    #[error("unknown claim `{id}`; known: {known}")]
    UnknownClaim {
        /// The id asked for.
        id: String,
        /// The ids dmalab can reproduce.
        known: String,
    },
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, SimError>;

/// A [`SimError::Iova`] for the operation `describe` names. The description is built only on
/// failure: map and unmap sit on every simulated I/O's path.
pub(crate) fn iova(
    describe: impl FnOnce() -> String,
) -> impl FnOnce(dmalab_iova::IovaError) -> SimError {
    move |source| SimError::Iova {
        operation: describe(),
        source,
    }
}

/// Shorthand for an [`SimError::InvalidArgument`].
/// Deserialize `value` (a JSON-like value, as a Python dict gives it) into `T`, with an error
/// naming the field: `{root}.{path}`, or the path alone when `root` is empty (`root` itself, or
/// `value` when both are empty, for an error in the whole value).
pub fn from_json<T: serde::de::DeserializeOwned>(
    root: &str,
    value: serde_json::Value,
) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = match (root.is_empty(), path == ".") {
            (true, true) => "value".to_string(),
            (true, false) => path,
            (false, true) => root.to_string(),
            (false, false) => format!("{root}.{path}"),
        };
        SimError::InvalidArgument {
            field,
            value: String::new(),
            valid: e.into_inner().to_string(),
        }
    })
}

pub(crate) fn invalid_arg(field: &str, value: impl ToString, valid: impl ToString) -> SimError {
    SimError::InvalidArgument {
        field: field.to_string(),
        value: value.to_string(),
        valid: valid.to_string(),
    }
}
