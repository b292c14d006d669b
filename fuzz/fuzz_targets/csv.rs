//! Fuzz target: content-sniffing ingest (`read_bytes`) on arbitrary bytes, which routes anything
//! without the report magic to the CSV page readers, then every value of every launch read (a
//! raw page's values are parsed when read). Must never panic; a page that ends inside a quoted
//! field must hand its complete launches to `salvage` (checks in `salvage.rs`).
//!
//! Besides the input as it is, the same bytes are read behind each kind of CSV header (details,
//! raw, source, GUI export), so the row-level code is reached without the fuzzer having to
//! discover a header first.
#![no_main]

mod salvage;

use libfuzzer_sys::fuzz_target;

const HEADERS: &[&[u8]] = &[
    b"\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Body Item Label\",\"Metric Name\",\"Metric Unit\",\"Metric Value\",\"Rule Name\",\"Rule Type\",\"Rule Description\",\"Estimated Speedup Type\",\"Estimated Speedup\"\n",
    b"\"ID\",\"Kernel Name\",\"Block Size\",\"CC\",\"gpu__time_duration.sum\",\"dram__bytes.sum\"\n\"\",\"\",\"\",\"\",\"usecond\",\"Kbyte\"\n",
    b"\"File Path\",\"k.cu\"\n\"Function Name\",\"k\"\n\"Line No\",\"Source\",\"Address\",\"Source\",\"Instructions Executed\"\n",
    b"\xef\xbb\xbfID,0,1\n",
];

fn read(data: &[u8]) {
    salvage::read_checked("fuzz.csv", data);
}

fuzz_target!(|data: &[u8]| {
    read(data);
    if data.starts_with(b"NVR\0") {
        return;
    }
    for h in HEADERS {
        read(&[*h, data].concat());
    }
});
