"""Oracle for timm-cpp's --pretrained: a Hugging Face hub cache made the way
huggingface_hub lays it out, and what Python timm loads from it offline.

  hub_cache_oracle.py make CACHE MODEL OUT
      Writes a seeded timm MODEL's weights as the model's default pretrained
      weights into CACHE: models--timm--<name>.<tag>/refs/main (a commit hash)
      and snapshots/<hash>/model.safetensors. Then loads them back as timm's
      create_model(MODEL, pretrained=True) does, offline from CACHE, for
      num_classes 1000 and 10 and in_chans 3 and 1, and writes each loaded
      state_dict to OUT/loaded_<num_classes>_<in_chans>.safetensors, and the
      weights written to OUT/weights.safetensors. Prints the hf_hub_id.
"""
import os
import sys

import huggingface_hub.constants as hf_constants
import safetensors.torch
import timm
import torch

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def cmd_make(cache, model_name, out):
    torch.manual_seed(0)
    model = timm.create_model(model_name, pretrained=False)
    hf_hub_id = model.pretrained_cfg["hf_hub_id"]
    repo = os.path.join(cache, "models--" + hf_hub_id.replace("/", "--"))
    snapshot = os.path.join(repo, "snapshots", COMMIT)
    os.makedirs(snapshot, exist_ok=True)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(COMMIT)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(state, os.path.join(snapshot, "model.safetensors"))
    os.makedirs(out, exist_ok=True)
    safetensors.torch.save_file(state, os.path.join(out, "weights.safetensors"))

    # hf_hub_download reads these at call time: offline, from CACHE.
    hf_constants.HF_HUB_CACHE = cache
    hf_constants.HF_HUB_OFFLINE = True
    for num_classes in (1000, 10):
        for in_chans in (3, 1):
            torch.manual_seed(1)
            loaded = timm.create_model(model_name, pretrained=True, num_classes=num_classes, in_chans=in_chans)
            state = {k: v.contiguous() for k, v in loaded.state_dict().items()}
            safetensors.torch.save_file(state, os.path.join(out, f"loaded_{num_classes}_{in_chans}.safetensors"))
    print(hf_hub_id)


def main():
    cmd, argv = sys.argv[1], sys.argv[2:]
    {"make": cmd_make}[cmd](*argv)


if __name__ == "__main__":
    main()
