//! `.npz` throughput: reading and writing 128 MB of f32 (one 32M-element array), against the
//! same process moving the same bytes with no format at all. `read_raw` is `std::fs::read`
//! of the stored archive (the page cache's speed; the file is hot), `write_raw` is an atomic
//! write of the same number of bytes over the last iteration's file (temporary file, fsync,
//! rename: what an hlosim output that replaces a file pays; a new output skips the fsync).
//! The `.npz` figures divided by these are the format's own cost; 1.0 is a
//! reader that copies nothing the kernel did not. `read_deflated` is the same array through
//! `np.savez_compressed`'s format (inflated once, into the final buffer). Throughput is
//! reported in bytes of array payload per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hlosim::hlo::{ArrayData, ArrayLiteral, ArrayShape, ElementType};
use hlosim::io::{atomic, npy, npz};
use std::path::PathBuf;
use std::time::Duration;

const ELEMENTS: usize = 32 << 20;

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("hlosim-bench-npz-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A 128 MB f32 array of distinct values (no all-zero pages; deflate has work to do).
fn array() -> ArrayLiteral {
    let v: Vec<f32> = (0..ELEMENTS).map(|i| (i as f32).sin()).collect();
    ArrayLiteral {
        shape: ArrayShape::new(ElementType::F32, vec![ELEMENTS as i64]),
        data: ArrayData::F32(v),
    }
}

fn npz_io(c: &mut Criterion) {
    let dir = scratch();
    let a = array();
    let stored = dir.join("stored.npz");
    let deflated = dir.join("deflated.npz");
    let raw_out = dir.join("raw.bin");
    let npz_out = dir.join("out.npz");
    npz::write_npz(&stored, &[("arg0".into(), &a)]).unwrap();
    {
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&deflated).unwrap());
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(Some(1));
        zip.start_file("arg0.npy", opts).unwrap();
        npy::write_to(&mut zip, &a).unwrap();
        zip.finish().unwrap();
    }
    // Check once that every path gives the array back.
    for f in [&stored, &deflated] {
        let back = npz::read_npz(f).unwrap();
        assert_eq!(back.len(), 1);
        assert!(back[0].array.data == a.data, "{} reads back", f.display());
    }
    let payload = (ELEMENTS * 4) as u64;
    let raw_bytes = vec![0x5au8; payload as usize];
    let mut g = c.benchmark_group("npz_128mb_f32");
    g.throughput(Throughput::Bytes(payload));
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(8));
    g.bench_function("read_raw", |b| b.iter(|| std::fs::read(&stored).unwrap()));
    g.bench_function("read_npz", |b| b.iter(|| npz::read_npz(&stored).unwrap()));
    g.bench_function("read_deflated", |b| {
        b.iter(|| npz::read_npz(&deflated).unwrap())
    });
    g.bench_function("write_raw", |b| {
        b.iter(|| atomic::write_bytes(&raw_out, &raw_bytes).unwrap())
    });
    g.bench_function("write_npz", |b| {
        b.iter(|| npz::write_npz(&npz_out, &[("out0".into(), &a)]).unwrap())
    });
    g.finish();
    std::fs::remove_dir_all(&dir).unwrap();
}

criterion_group!(benches, npz_io);
criterion_main!(benches);
