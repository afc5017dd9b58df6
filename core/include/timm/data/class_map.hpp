// --class-map: timm's load_class_map (timm/data/readers/class_map.py), the
// class name -> index map that replaces the sorted class index of the folder
// and tar readers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace timm {

using ClassMap = std::map<std::string, int64_t>;

// Reads `file`, or `root` / `file` when `file` does not exist (timm looks in
// the reader's root: the split folder, the .tar or the folder of shards).
//  - .txt (the extension in any case): one class name per line, its index
//    the line's number from 0; names are stripped of surrounding whitespace
//    as Python's str.strip() (ASCII whitespace and \x1c-\x1f; Unicode
//    spaces are kept); lines end at \n, \r\n or \r (Python's text mode).
//    Stricter than timm, which keeps the last of repeated names and maps a
//    blank line to the name '': a blank line, a repeated name, bytes that are
//    not UTF-8 and an empty file throw Error naming the file and the line.
//  - .pkl: a pickled dict {class name (str): index (int)}, read by
//    timm/io/pickle.hpp with no global allowed (timm's _ClassMapUnpickler):
//    no code runs; any other content throws Error naming the file. timm
//    also takes int keys (source class indices, for datasets that store
//    indices); the folder and tar readers' labels are names, so they are
//    refused.
// A file found nowhere, or another extension, throws UsageError.
ClassMap load_class_map(const std::filesystem::path& file, const std::filesystem::path& root = {});

// The class count a map implies: its largest index + 1 (the map's size when
// the indices are 0..n-1).
int64_t class_map_num_classes(const ClassMap& class_map);

}  // namespace timm
