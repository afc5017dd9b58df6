"""Python oracle for test_naflex_sampler: the batch schedule of timm's NaFlex training loader
(timm/data/naflex_dataset.py NaFlexMapDatasetWrapper), batch by batch.

Usage: naflex_sampler_oracle.py CASES_JSON
    CASES_JSON: a list of cases, each {"size": the dataset's length, "epochs": the epochs to
    list, and the wrapper's keyword arguments "seq_lens", "max_tokens_per_batch", "seed",
    "shuffle", "distributed", "rank", "world_size", "batch_divisor", "patch_size_choices",
    "patch_size_choice_probs" (absent: the defaults)}. Prints a JSON list, per case either
    {"error": "<type>: <message>"} when the constructor raises, or {"len": batches per epoch,
    "schedule": [[seq_len, batch_size], ...], "epochs": [{"epoch": e, "batches": [[seq_len,
    patch_idx, [indices ...]], ...]}]} from _prepare_epoch_batches(e).
"""
import contextlib
import io
import json
import sys

from timm.data.naflex_dataset import NaFlexMapDatasetWrapper

WRAPPER_ARGS = ("seq_lens", "max_tokens_per_batch", "seed", "shuffle", "distributed", "rank", "world_size",
                "batch_divisor", "patch_size_choices", "patch_size_choice_probs")


class Indices:
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        return i, 0


def run(case):
    kwargs = {k: case[k] for k in WRAPPER_ARGS if k in case}
    try:
        # The wrapper prints its schedule's size; the output carries only the JSON.
        with contextlib.redirect_stdout(io.StringIO()):
            wrapper = NaFlexMapDatasetWrapper(Indices(case["size"]), **kwargs)
    except (ValueError, TypeError) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    out = {"len": len(wrapper), "schedule": [list(s) for s in wrapper._canonical_batch_schedule], "epochs": []}
    for epoch in case["epochs"]:
        batches = wrapper._prepare_epoch_batches(epoch)
        out["epochs"].append({"epoch": epoch, "batches": [[s, p, list(i)] for s, p, i in batches]})
    return out


if __name__ == "__main__":
    print(json.dumps([run(c) for c in json.loads(sys.argv[1])]))
