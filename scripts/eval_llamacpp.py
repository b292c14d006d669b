#!/usr/bin/env python3
"""Answers `keet eval --questions-out` questions with llama.cpp (the prebuilt `xllamacpp` wheel), so a
model keet's own engine does not run fast (or at all) can be scored with `keet eval --answers`:

  python3 -m venv .venv-peer && .venv-peer/bin/pip install xllamacpp==2026.10.11549
  keet eval ../shared/corpus --seeds 0,1 --no-llm --questions-out q.jsonl
  .venv-peer/bin/python scripts/eval_llamacpp.py MODEL.gguf q.jsonl answers.jsonl --formats none,raw,generic,context
  keet eval --questions q.jsonl --answers answers.jsonl

The prompt is keet's own (src/eval/answer.rs): the system prompt of expert/eval.toml, then one user
message with the context, the question and its lettered options, in the model's chat template. The
answer is one letter under the grammar `[ABCD]` (greedy). Each question is asked in every rotation of
its options (`--rotations 4`, the default, as `keet eval`: option (i + r) % 4 under letter i; scored as
circular accuracy), or as drawn (`--rotations 1`). Questions are asked per format, then per context,
then per rotation, with llama.cpp's prompt cache on, so each context is prefilled once per format as
in keet.
Prints progress and the prompt tokens run and reused to stderr.
"""
import argparse, json, sys, time
import tomllib
from pathlib import Path

import xllamacpp as xlc

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("questions")
ap.add_argument("answers")
ap.add_argument("--formats", default="none,raw,generic,context")
ap.add_argument("--rotations", type=int, choices=[1, 4], default=4)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--ctx", type=int, default=8192)
a = ap.parse_args()

root = Path(__file__).resolve().parent.parent
system = tomllib.loads((root / "expert/eval.toml").read_text())["system"]["prompt"]
questions = [json.loads(l) for l in open(a.questions) if l.strip()]
formats = [f for f in a.formats.split(",") if f]
for f in formats:
    missing = [q["id"] for q in questions if f not in q["contexts"]]
    if missing:
        sys.exit(f"{a.questions}: format {f} has no context for {len(missing)} questions (first {missing[0]})")

p = xlc.CommonParams()
p.model.path = a.model
p.n_ctx = a.ctx
p.n_batch = 512
p.n_ubatch = 512
p.n_parallel = 1
p.cpuparams.n_threads = a.threads
p.cpuparams_batch.n_threads = a.threads
srv = xlc.Server(p)


def prompt(context, q, rotation):
    s = context.rstrip() + "\n\n---\nQuestion: " + q["question"] + "\n"
    n = len(q["options"])
    for letter, option in zip("ABCD", [q["options"][(i + rotation) % n] for i in range(n)]):
        s += f"{letter}. {option}\n"
    return s + "Answer with the letter of the correct option."


# Format, then context (questions about one kernel together), then seed: the shared prefix first.
order = sorted(range(len(questions)), key=lambda i: (questions[i]["file"], questions[i]["kernel"], questions[i].get("seed", 0), i))
total = len(order) * len(formats) * a.rotations
done = run_tokens = cached_tokens = 0
t0 = time.time()
with open(a.answers, "w") as out:
    for f in formats:
        for i, rotation in [(i, r) for i in order for r in range(a.rotations)]:
            q = questions[i]
            req = {
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt(q["contexts"][f], q, rotation)}],
                "max_tokens": 1, "n_predict": 1, "temperature": 0, "cache_prompt": True,
                "grammar": "root ::= [ABCD]",
            }
            r = srv.handle_chat_completions(req)
            if isinstance(r, str):
                r = json.loads(r)
            if "choices" not in r:
                sys.exit(f"llama.cpp: {str(r)[:400]}")
            letter = r["choices"][0]["message"]["content"].strip()
            tm = r.get("timings", {})
            run_tokens += tm.get("prompt_n", 0)
            cached_tokens += tm.get("cache_n", 0)
            out.write(json.dumps({"id": q["id"], "format": f, "rotation": rotation, "answer": letter, "model": Path(a.model).name}) + "\n")
            done += 1
            el = time.time() - t0
            print(f"\r{done}/{total} {f}: {run_tokens} prompt tokens run, {cached_tokens} from cache, {el/60:.1f} min, ETA {el/done*(total-done)/60:.1f} min", end="", file=sys.stderr, flush=True)
print(file=sys.stderr)
