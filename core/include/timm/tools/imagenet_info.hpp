// timm's ImageNetInfo('imagenet-1k') (inference.py's class labels): each of
// the 1000 classes' WordNet synset (its label name), lemmas (its
// description) and definition (with the lemmas, its detailed description).
//
//   const timm::ClassLabel& label = timm::imagenet1k_labels()[index];
//   label.name;                 // "n01440764"
//   label.description;          // "tench, Tinca tinca"
//   label.detailed_description();  // "tench, Tinca tinca: freshwater dace-like game fish ..."
#pragma once

#include <string>
#include <vector>

namespace timm {

struct ClassLabel {
  std::string name;
  std::string description;
  std::string definition;
  // timm's label_name_to_description(detailed=True).
  std::string detailed_description() const { return description + ": " + definition; }
};

// The 1000 classes in index order, built into the core
// (data/imagenet1k_labels.tsv, from timm's _info files).
const std::vector<ClassLabel>& imagenet1k_labels();

}  // namespace timm
