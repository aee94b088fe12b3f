//! Property tests of the SCSI controller's write stream (`scsi_tx`, seed 004's 53c1010 under
//! `dd`): the rate never passes its disks or its SCSI buses and falls with control reads; the
//! consistent mapping's MRM hints act only through control reads long enough to go as Memory
//! Read Multiple; and such reads lie on each channel's serial path, so a shallower prefetch
//! slows it.

use dmalab_sim::bus::hints::{HintChange, HintTable, Mapping, ReadCommand, BLOCK_SIZES};
use dmalab_sim::bus::pci::PciBus;
use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::workload::scsi_tx::{parts, run, ScsiTxParams};
use proptest::prelude::*;

fn zx1() -> Platform {
    Platform::builtin("hp-rx2600-zx1", &Picks::new()).unwrap()
}

/// A controller of 1 to 4 channels with commands, entries and bursts of any valid size, and
/// control reads of `control` bytes.
fn controller(control: std::ops::RangeInclusive<u64>) -> impl Strategy<Value = ScsiTxParams> {
    (
        1u64..=4,
        (0u32..=3, 0u32..=4, 0u32..=6),
        (control.clone(), control, 0u64..=48),
        (20u64..=400, 50u64..=2_000),
    )
        .prop_map(
            |(channels, (entry, more, burst), (entry_ctl, cmd_ctl, reads), (scsi, array))| {
                let sg_entry_bytes = 1024 << entry;
                ScsiTxParams {
                    channels,
                    command_bytes: sg_entry_bytes << more,
                    sg_entry_bytes,
                    burst_bytes: (sg_entry_bytes >> burst).max(8),
                    entry_control_bytes: entry_ctl,
                    command_reads: reads,
                    command_read_bytes: cmd_ctl,
                    scsi_mb_s: scsi,
                    array_mb_s: array,
                }
            },
        )
}

/// The firmware's hints with the consistent mapping's MRM changed.
fn consistent_mrm(fw: &HintTable, change: HintChange) -> HintTable {
    let mut t = *fw;
    HintChange {
        commands: Some(vec![ReadCommand::Mrm]),
        ..change
    }
    .apply(&mut t, Mapping::Consistent)
    .unwrap();
    t
}

fn bus_and_firmware(p: &Platform) -> (&PciBus, HintTable) {
    let (bus, fw, _) = parts(p).unwrap();
    (bus, fw)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The disks and the SCSI buses bound the rate, and more control reads a command never
    /// raise it.
    #[test]
    fn the_rate_stays_under_the_disks_and_falls_with_control_reads(
        params in controller(1..=1024),
        more in 1u64..=16,
    ) {
        let p = zx1();
        let (bus, fw) = bus_and_firmware(&p);
        let r = run(bus, &params, &fw).unwrap();
        prop_assert!(r.mb_s <= params.array_mb_s as f64, "{r:?}");
        prop_assert!(r.mb_s <= (params.channels * params.scsi_mb_s) as f64, "{r:?}");
        let busier = ScsiTxParams { command_reads: params.command_reads + more, ..params };
        let b = run(bus, &busier, &fw).unwrap();
        prop_assert!(b.mb_s <= r.mb_s && b.control_ns > r.control_ns, "{b:?} {r:?}");
    }

    /// Control reads under two lines go as Memory Read: no prefetch depth or block size of the
    /// consistent mapping's MRM changes anything, whatever the rest.
    #[test]
    fn short_control_reads_give_consistent_mrm_nothing_to_act_on(params in controller(1..=255)) {
        let p = zx1();
        let (bus, fw) = bus_and_firmware(&p);
        let base = run(bus, &params, &fw).unwrap();
        for d in 0..=3 {
            let t = consistent_mrm(&fw, HintChange { prefetch_lines: Some(d), ..HintChange::default() });
            prop_assert_eq!(&run(bus, &params, &t).unwrap(), &base);
        }
        for &b in BLOCK_SIZES.iter() {
            let t = consistent_mrm(&fw, HintChange { block_bytes: Some(b), ..HintChange::default() });
            prop_assert_eq!(&run(bus, &params, &t).unwrap(), &base);
        }
    }

    /// Control reads of two lines or more lie on each channel's serial path: where nothing but
    /// that path limits, prefetch depth 0 on them is slower than the firmware's depth 3.
    #[test]
    fn long_control_reads_slow_the_channel_at_depth_zero(
        params in controller(256..=1024).prop_filter("some control reads", |p| p.command_reads > 0),
    ) {
        let p = zx1();
        let (bus, fw) = bus_and_firmware(&p);
        let open = ScsiTxParams { array_mb_s: 1_000_000, scsi_mb_s: 1_000_000, channels: 1, ..params };
        let base = run(bus, &open, &fw).unwrap();
        let t = consistent_mrm(&fw, HintChange { prefetch_lines: Some(0), ..HintChange::default() });
        let slow = run(bus, &open, &t).unwrap();
        prop_assert!(slow.control_ns > base.control_ns, "{slow:?} {base:?}");
        prop_assert_eq!(slow.data_ns, base.data_ns);
        if base.limit == "pci path" {
            prop_assert!(slow.mb_s < base.mb_s, "{slow:?} {base:?}");
        }
    }
}
