#!/usr/bin/env python3
"""Seeds for keet's fuzz targets, made from the shared corpus (read only) into a scratch folder,
never into the repository: whole files, prefixes (reports and pages cut off mid-write at 10/50/90%
of their bytes, at fixed sizes and at random points) and UTF-16 LE/BE / UTF-8-BOM twins of CSV heads.

  python3 fuzz/seed_corpus.py [CORPUS_DIR] [OUT_DIR]     # default ../shared/corpus, /tmp/keet-fuzz
  -> OUT_DIR/seed_ncu_rep, OUT_DIR/seed_csv
"""
import glob, os, random, sys
C = sys.argv[1] if len(sys.argv) > 1 else "../shared/corpus"
OUT = sys.argv[2] if len(sys.argv) > 2 else "/tmp/keet-fuzz"
out_rep = os.path.join(OUT, "seed_ncu_rep"); out_csv = os.path.join(OUT, "seed_csv")
os.makedirs(out_rep, exist_ok=True); os.makedirs(out_csv, exist_ok=True)
def put(d, name, b):
    open(os.path.join(d, name), "wb").write(b)
rng = random.Random(13)
for p in sorted(glob.glob(C + "/*/*.ncu-rep")):
    b = open(p, "rb").read(); tag = p.split("/")[-2] + "_" + os.path.basename(p)
    if len(b) <= 350_000: put(out_rep, tag, b)
    for f in (0.1, 0.5, 0.9):
        k = int(len(b) * f)
        if k <= 350_000: put(out_rep, f"{tag}.cut{int(f*100)}", b[:k])
    for k in (256, 2048, 16384, 65536, 200_000, 340_000):
        if k < len(b): put(out_rep, f"{tag}.head{k}", b[:k])
    # a few random cuts within the first 350 KB
    for i in range(4):
        k = rng.randrange(8, min(len(b), 350_000)); put(out_rep, f"{tag}.rnd{i}", b[:k])
for p in sorted(glob.glob(C + "/*/*.csv")):
    b = open(p, "rb").read(); tag = p.split("/")[-2] + "_" + os.path.basename(p)
    if len(b) <= 65536: put(out_csv, tag, b)
    for k in (1024, 4096, 16384, 65536):
        if k < len(b): put(out_csv, f"{tag}.head{k}", b[:k])
    for f in (0.1, 0.5, 0.9):
        k = int(len(b) * f)
        if k <= 65536: put(out_csv, f"{tag}.cut{int(f*100)}", b[:k])
    h = b[:4096]
    if h.startswith(b"\xef\xbb\xbf"): h = h[3:]
    t = h.decode("utf-8", "replace")
    put(out_csv, f"{tag}.u16le_bom", b"\xff\xfe" + t.encode("utf-16-le"))
    put(out_csv, f"{tag}.u16be_bom", b"\xfe\xff" + t.encode("utf-16-be"))
    put(out_csv, f"{tag}.u16le_nobom", t.encode("utf-16-le"))
    put(out_csv, f"{tag}.u8bom", b"\xef\xbb\xbf" + h)
print(len(os.listdir(out_rep)), len(os.listdir(out_csv)))
