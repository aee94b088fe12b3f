//! The smallest IOVA space a workload needs. Seed 003 (section 5) leaves open how large a
//! domain's IOVA space should be: too small and mappings are refused under load, too large and
//! the page tables (and, for a bitmap allocator, its map) grow with it. For one scenario, its
//! devices and its allocator, this finds the smallest window in whole pages at which the run
//! never has a mapping refused, by bisection between a window that refuses and one that does
//! not, and reports the memory the translation tables of that window take.
//!
//! The answer is for this run: its length, seed and interleaving. A longer run can meet a
//! fragmentation the shorter one never reached, so the probes' windows are reported with their
//! outcomes. Bisection takes refusal to be monotone in the window size (a larger window refuses
//! only where a smaller one does); each probe is a full run, so the two windows either side of
//! the answer are both run and shown.

use crate::config::platform::Platform;
use crate::config::scenario::{Scenario, Task};
use crate::error::{invalid_arg, Result, SimError};
use crate::iommu::Translation;
use crate::progress::Progress;
use serde::Serialize;

/// One run of the scenario at a window size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// The IOVA window tried, bytes.
    pub window_bytes: u64,
    /// The allocator's refusal, if the run had one.
    pub refusal: Option<String>,
}

/// The search's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpaceResult {
    /// The scenario.
    pub scenario: String,
    /// Its platform.
    pub platform: String,
    /// The allocator searched for.
    pub allocator: String,
    /// The translation the run used (page tables or TCEs).
    pub translation: Translation,
    /// The I/O page size.
    pub page_bytes: u64,
    /// The scenario's own window, bytes.
    pub scenario_window_bytes: u64,
    /// The smallest window at which the run had no mapping refused, bytes.
    pub window_bytes: u64,
    /// The same in pages (page 0 is never handed out, so one more than the usable pages).
    pub window_pages: u64,
    /// The largest window tried that refused a mapping, if any was (none when the smallest
    /// window the scenario reader accepts already suffices).
    pub refused_at_bytes: Option<u64>,
    /// Translation-table bytes to map the whole smallest window: 8-byte entries in tables of
    /// one page per level of the platform's page tables, or one flat TCE table.
    pub table_bytes: u64,
    /// The same for the scenario's own window.
    pub scenario_table_bytes: u64,
    /// Every run made, in order.
    pub probes: Vec<Probe>,
}

/// The smallest window the scenario reader accepts (`mapping.window_bytes`).
pub const MIN_WINDOW_BYTES: u64 = 1 << 13;

/// Find the smallest IOVA window at which `scenario` runs with no mapping refused. Each probe
/// runs the whole scenario; `progress` counts probes (of an upper bound on their number).
pub fn smallest_space(scenario: &Scenario, progress: &Progress) -> Result<SpaceResult> {
    let Task::Run(task) = &scenario.task else {
        return Err(invalid_arg(
            "scenario",
            &scenario.name,
            "a run scenario ([mapping] and [workload])",
        ));
    };
    let platform = Platform::load_drawn(&scenario.platform, &scenario.choices, &scenario.draws)?;
    let Some(costs) = platform.iommu.as_ref() else {
        return Err(invalid_arg(
            "platform",
            &platform.name,
            "a platform with an [iommu] section",
        ));
    };
    let page = costs.page_bytes;
    let own = task.window_bytes;
    let with_window = |bytes: u64| {
        let mut s = scenario.clone();
        if let Task::Run(t) = &mut s.task {
            t.window_bytes = bytes;
        }
        s
    };
    let mut probes = Vec::new();
    let probe = |bytes: u64, probes: &mut Vec<Probe>| -> Result<Option<Translation>> {
        let (outcome, refusal) = match with_window(bytes).run_with(&progress.child()) {
            Ok(r) => (Some(r.translation), None),
            Err(SimError::Iova {
                source: dmalab_iova::IovaError::NoSpace { .. },
                operation,
            }) => (None, Some(operation)),
            Err(e) => return Err(e),
        };
        probes.push(Probe {
            window_bytes: bytes,
            refusal,
        });
        Ok(outcome)
    };
    // Steps: the scenario's own window, the smallest, then a bisection over pages.
    let steps = 2 + u64::from(64 - (own / page).leading_zeros());
    progress.start(steps);
    let translation = probe(own, &mut probes)?.ok_or_else(|| {
        invalid_arg(
            "mapping.window_bytes",
            own,
            "a window at which the scenario runs without a refused mapping (start the search from a larger one)",
        )
    })?;
    if !matches!(translation, Translation::PageTable | Translation::Tce) {
        return Err(invalid_arg(
            "mapping.translation",
            format!("{translation:?}"),
            "page-table or tce (only they allocate IOVAs)",
        ));
    }
    progress.set(1);
    let mut ok = own / page;
    let mut refused = None;
    let least = MIN_WINDOW_BYTES.div_ceil(page).max(2);
    if least < ok {
        if probe(least * page, &mut probes)?.is_some() {
            ok = least;
        } else {
            refused = Some(least);
        }
    }
    progress.set(2);
    while let Some(bad) = refused.filter(|&b| b + 1 < ok) {
        let mid = bad + (ok - bad) / 2;
        if probe(mid * page, &mut probes)?.is_some() {
            ok = mid;
        } else {
            refused = Some(mid);
        }
        progress.set(probes.len() as u64);
    }
    progress.set(steps);
    let levels = costs.table_levels;
    Ok(SpaceResult {
        scenario: scenario.name.clone(),
        platform: platform.name.clone(),
        allocator: task.allocator.name(),
        translation,
        page_bytes: page,
        scenario_window_bytes: own,
        window_bytes: ok * page,
        window_pages: ok,
        refused_at_bytes: refused.map(|b| b * page),
        table_bytes: table_bytes(translation, ok, page, levels),
        scenario_table_bytes: table_bytes(translation, own / page, page, levels),
        probes,
    })
}

/// Bytes of translation tables mapping `pages` pages of `page` bytes: a flat table of 8-byte
/// TCEs (PAPR), or a radix tree of `levels` levels whose tables are one page of 8-byte entries
/// each (VT-d, AMD-Vi and Arm VMSAv8-64 with a 4 KiB granule: 512 entries a table), every level
/// as full as the window needs, with one table at the top.
pub fn table_bytes(translation: Translation, pages: u64, page: u64, levels: u64) -> u64 {
    if translation == Translation::Tce {
        return pages * 8;
    }
    let per_table = page / 8;
    let mut tables = 0;
    let mut entries = pages;
    for _ in 0..levels {
        let here = entries.div_ceil(per_table).max(1);
        tables += here;
        entries = here;
    }
    tables * page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_grow_with_the_window_level_by_level() {
        let pt = Translation::PageTable;
        // One leaf table maps 512 pages; above it one table per level.
        assert_eq!(table_bytes(pt, 512, 4096, 4), 4 * 4096);
        assert_eq!(table_bytes(pt, 513, 4096, 4), 5 * 4096);
        // 4 GiB of 4 KiB pages: 2048 leaf tables, 4 above them, then 1 and 1.
        assert_eq!(table_bytes(pt, 1 << 20, 4096, 4), (2048 + 4 + 1 + 1) * 4096);
        assert_eq!(table_bytes(Translation::Tce, 1 << 20, 4096, 4), 8 << 20);
    }
}
