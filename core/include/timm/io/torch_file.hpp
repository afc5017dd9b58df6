// Reading the tensors of files written by Python's torch.save, without Python.
//
// torch.save (since torch 1.6) writes a zip archive: "<name>/data.pkl", a
// pickle (protocol 2) of the saved object whose tensors refer by key to raw
// storages "<name>/data/<key>". LibTorch's own unpickler cannot read what
// timm saves (an OrderedDict state_dict, argparse.Namespace args), so this is
// a small pickle interpreter of our own: it executes no code, knows the few
// globals a checkpoint needs (OrderedDict, torch._utils._rebuild_tensor_v2,
// _rebuild_parameter, the typed storages) and keeps every other class
// (argparse.Namespace, numpy scalars, ...) as an opaque object nobody reads.
// Every read is bounds-checked; a malformed or unsupported file throws
// timm::Error naming the file and what was wrong (legacy non-zip files, big-
// endian data, an unknown opcode, a truncated pickle, a storage too small for
// its tensor view, ...). A hostile file cannot make it crash, hang or
// allocate more than a small multiple of the file's size: the zip's declared
// sizes are checked against the file before the zip reader allocates them,
// the pickle's nesting (1000 levels, as CPython's recursion limit), stack and
// memo are bounded, and cycles refused (torch_file.cpp lists the limits).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "timm/io/named_tensors.hpp"

namespace timm {

// What a torch.save'd file holds at its top level, reduced to what a model
// loader needs.
struct TorchFile {
  // The top-level object when it is a dict of str -> tensor (a saved
  // state_dict), in file order; empty otherwise.
  NamedTensors tensors;
  // For a top-level dict (a training checkpoint): its keys, and for each
  // value that is itself a str -> tensor dict (state_dict, state_dict_ema,
  // model, ...), its tensors under that key.
  std::vector<std::string> keys;
  std::vector<std::pair<std::string, NamedTensors>> state_dicts;
  bool is_dict = false;  // the top-level object is a dict
  // Top-level keys whose value is None (e.g. state_dict_ema when EMA is off).
  std::vector<std::string> none_keys;
};

// Reads `path` as a torch.save zip archive. Tensors are CPU tensors that own
// their memory (views of one storage stay views of one copy).
TorchFile read_torch_file(const std::filesystem::path& path);

}  // namespace timm
