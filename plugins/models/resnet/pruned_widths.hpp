// Generated once from timm 1.0.31's timm/models/_pruned/ecaresnet50d_pruned.txt and
// ecaresnet101d_pruned.txt (the channel counts timm's adapt_model_from_file gives those
// models) by a throwaway script; not read at run time. Per block of layer1..layer4: the
// output channels of conv1, conv2, conv3 (= the shortcut's) and the ECA conv's kernel size.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace timm::resnet {

struct PrunedBlock {
  int64_t conv1, conv2, conv3, eca_kernel;
};

struct PrunedWidths {
  std::array<int64_t, 3> stem;  // conv1.0, conv1.3, conv1.6 output channels
  std::vector<std::vector<PrunedBlock>> stages;
  int64_t num_features;  // fc's input
};

// timm/models/_pruned/ecaresnet50d_pruned.txt
inline const PrunedWidths kEcaresnet50dPruned = {
    {32, 32, 64},
    {
        {{47, 18, 19, 5}, {52, 22, 19, 5}, {64, 35, 19, 5}},
        {{85, 37, 171, 5}, {107, 80, 171, 5}, {120, 85, 171, 5}, {125, 87, 171, 5}},
        {{198, 126, 818, 5},
         {255, 232, 818, 5},
         {256, 233, 818, 5},
         {253, 235, 818, 5},
         {256, 225, 818, 5},
         {256, 239, 818, 5}},
        {{492, 237, 2022, 7}, {512, 500, 2022, 7}, {512, 490, 2022, 7}},
    },
    2022,
};

// timm/models/_pruned/ecaresnet101d_pruned.txt
inline const PrunedWidths kEcaresnet101dPruned = {
    {32, 32, 64},
    {
        {{45, 25, 26, 5}, {53, 20, 26, 5}, {60, 27, 26, 5}},
        {{81, 24, 142, 5}, {93, 49, 142, 5}, {102, 54, 142, 5}, {122, 78, 142, 5}},
        {{101, 25, 278, 5},  {239, 160, 278, 5}, {234, 156, 278, 5}, {250, 176, 278, 5}, {253, 191, 278, 5},
         {251, 175, 278, 5}, {230, 128, 278, 5}, {244, 154, 278, 5}, {244, 159, 278, 5}, {238, 97, 278, 5},
         {244, 149, 278, 5}, {253, 181, 278, 5}, {245, 119, 278, 5}, {255, 216, 278, 5}, {256, 201, 278, 5},
         {253, 149, 278, 5}, {254, 141, 278, 5}, {256, 190, 278, 5}, {256, 217, 278, 5}, {255, 156, 278, 5},
         {256, 155, 278, 5}, {256, 232, 278, 5}, {256, 214, 278, 5}},
        {{499, 289, 2042, 7}, {512, 512, 2042, 7}, {512, 502, 2042, 7}},
    },
    2042,
};

}  // namespace timm::resnet
