#!/usr/bin/env python3
"""Records reference token ids for keet's tokenizer test (tests/data/tokenizer_reference_smollm2.json).

    python3 scripts/make_tokenizer_reference.py MODEL.gguf [OUT.json]

The ids come from an implementation independent of keet:
  * llama.cpp (llama-cpp-python, vocab only) when `import llama_cpp` works: the engine the GGUF was
    made for; otherwise
  * the `gguf` Python package reading tokenizer.ggml.* plus the Hugging Face `tokenizers` Python
    package building the byte-level BPE the way SmolLM2's tokenizer.json does (Digits(individual) then
    ByteLevel(add_prefix_space=False), control tokens as special tokens).
  pip install gguf tokenizers            # (or llama-cpp-python==0.3.36)
Run once; the JSON is committed. Strings are tokenized as plain text with special-token parsing on.
"""
import json
import sys

STRINGS = [
    "Hello, world!",
    "The kernel took 2.41 ms on 80 SMs (38.7% of peak).",
    "1234567890 3.14159 -0.5e-10 0x1F 1,000,000",
    "    four leading spaces and   three inside\tand a tab",
    "line one\nline two\n\n\nthree newlines\r\nwindows",
    "__global__ void k(float* __restrict__ a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= 2.0f; }",
    "for (int k = 0; k < 32; ++k) { acc += As[ty][k] * Bs[k][tx]; }\n    __syncthreads();",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": None}  # comment",
    "Unicode: naïve café, Straße, Ελληνικά, русский, 日本語のテキスト, 한국어, emoji 🚀🔥👍🏽, math ∑∫√∞ ≤ ≥",
    "Mixed   \n  whitespace \t\t runs\n\n  ",
    "{\"summary\": \"Uncoalesced loads\", \"fixes\": [{\"change\": \"pad As[32][33]\", \"gain\": 25}]}",
    "<|im_start|>user\nWhat limits this kernel?<|im_end|>\n<|im_start|>assistant\n",
    "smem_bank_conflicts=4.2/req; sectors/req=12.5; l1_hit=52.3%; dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "I'm sure you'll see they've said it's what we'd done",
    "   ",
    "a",
    "ÀÁÂÃÄÅ ĀāĂă ṀṁṂ",
    "végétal \u00a0non-breaking\u2009thin\u200bzero-width",
]


def with_llama_cpp(path):
    import llama_cpp.llama_cpp as llama_cpp_mod
    from llama_cpp import Llama

    orig = llama_cpp_mod.llama_model_default_params

    def params():
        p = orig()
        p.use_extra_bufts = False  # the AMX path crashes under some hypervisors
        return p

    llama_cpp_mod.llama_model_default_params = params
    llm = Llama(model_path=path, vocab_only=True, verbose=False)
    return "llama.cpp (llama-cpp-python)", [llm.tokenize(s.encode(), add_bos=False, special=True) for s in STRINGS]


def with_hf_tokenizers(path):
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    r = GGUFReader(path)
    f = r.fields
    tokens = f["tokenizer.ggml.tokens"].contents()
    merges = [tuple(m.split(" ", 1)) for m in f["tokenizer.ggml.merges"].contents()]
    types = f["tokenizer.ggml.token_type"].contents()
    assert f["tokenizer.ggml.model"].contents() == "gpt2"
    vocab = {t: i for i, t in enumerate(tokens)}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True) for t, ty in zip(tokens, types) if ty == 3])
    return "gguf + Hugging Face tokenizers (Python)", [tk.encode(s, add_special_tokens=False).ids for s in STRINGS]


def main():
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else "tests/data/tokenizer_reference_smollm2.json"
    try:
        source, ids = with_llama_cpp(path)
    except ImportError:
        source, ids = with_hf_tokenizers(path)
    doc = {
        "model": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "source": source,
        "made_by": "scripts/make_tokenizer_reference.py",
        "cases": [{"text": s, "ids": i} for s, i in zip(STRINGS, ids)],
    }
    cases = doc.pop("cases")
    with open(out, "w", encoding="utf-8") as fh:
        head = json.dumps(doc, ensure_ascii=False, indent=1)[:-2]
        fh.write(head + ',\n "cases": [\n')
        fh.write(",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in cases))
        fh.write("\n ]\n}\n")
    print(f"wrote {len(STRINGS)} cases from {source} to {out}")


if __name__ == "__main__":
    main()
