// PatchRandomErasing against timm's (tests/oracle/naflex_erasing_oracle.py):
// the patches each erasure writes, from timm's recorded random draws replayed
// into ours (region and patch modes, counts, areas, padded grids), and the
// reprs; then, with our Rng, what apply() writes in each mode: zeros, one
// value per channel, noise per pixel, never padding, the clean first split.
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "scripted_erase_draws.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/naflex_random_erasing.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_naflex_erasing {

using json = nlohmann::json;
using namespace timm;

namespace {

// A sample's (y, x) grid of h x w valid patches, row-major, then `pad` padding.
struct Grid {
  at::Tensor coord, valid;
};
Grid grid(int64_t h, int64_t w, int64_t pad) {
  const at::Tensor ys = at::arange(h).repeat_interleave(w), xs = at::arange(w).repeat({h});
  return {at::cat({at::stack({ys, xs}, 1), at::zeros({pad, 2}, at::kLong)}),
          at::cat({at::ones({h * w}, at::kBool), at::zeros({pad}, at::kBool)})};
}

PatchRandomErasingOptions options_of(const json& c) {
  PatchRandomErasingOptions o;
  o.spatial_mode = c["spatial"];
  o.erasing.probability = c["p"];
  o.erasing.min_count = c["min_count"];
  o.erasing.max_count = c["max_count"].get<int64_t>();
  if (c.contains("min_area")) o.erasing.min_area = c["min_area"];
  if (c.contains("max_area")) o.erasing.max_area = c["max_area"];
  return o;
}

}  // namespace

TEST_CASE("PatchRandomErasing: the patches each erasure writes equal timm's for the same draws; reprs equal timm's") {
  json cases = json::array();
  const auto add = [&](const std::string& spatial, double p, int64_t lo, int64_t hi, int64_t h, int64_t w, int64_t pad,
                       int trials, int seed) {
    cases.push_back({{"spatial", spatial},
                     {"p", p},
                     {"min_count", lo},
                     {"max_count", hi},
                     {"grid", {h, w}},
                     {"pad", pad},
                     {"trials", trials},
                     {"seed", seed}});
  };
  add("region", 1.0, 1, 3, 5, 7, 4, 200, 1);
  add("region", 0.5, 1, 1, 14, 14, 20, 200, 2);
  add("region", 1.0, 2, 4, 1, 9, 0, 100, 3);
  add("region", 1.0, 1, 1, 24, 32, 0, 100, 4);
  add("patch", 1.0, 1, 3, 12, 9, 7, 200, 5);
  add("patch", 0.25, 1, 1, 16, 16, 0, 100, 6);
  add("patch", 1.0, 1, 1, 1, 1, 3, 20, 7);
  cases.push_back({{"spatial", "region"},
                   {"p", 1.0},
                   {"min_count", 1},
                   {"max_count", 2},
                   {"min_area", 0.3},
                   {"max_area", 0.9},
                   {"grid", {6, 4}},
                   {"pad", 2},
                   {"trials", 100},
                   {"seed", 8}});
  const json timm_out = json::parse(test::run_oracle("naflex_erasing_oracle.py", {cases.dump()}));
  REQUIRE(timm_out.size() == cases.size());
  int64_t trials = 0, sets = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const json& c = cases[k];
    CAPTURE(c.dump());
    const PatchRandomErasing erasing(options_of(c));
    CHECK(erasing.repr() == timm_out[k]["repr"].get<std::string>());
    const Grid g = grid(c["grid"][0], c["grid"][1], c["pad"]);
    for (const json& trial : timm_out[k]["trials"]) {
      test::ScriptedEraseDraws draws(trial["draws"].get<std::vector<std::string>>());
      const auto ours = erasing.plan(g.coord, g.valid, draws);
      CHECK_MESSAGE(ours == trial["sets"].get<std::vector<std::vector<int64_t>>>(), trial.dump());
      CHECK_MESSAGE(draws.done(), "fewer draws than timm made: " << trial.dump());
      ++trials;
      sets += static_cast<int64_t>(ours.size());
    }
  }
  CHECK(trials == 1020);
  CHECK(sets > 700);
  MESSAGE("PatchRandomErasing vs timm: " << trials << " trials, " << sets << " erasures, all equal");
}

TEST_CASE("PatchRandomErasing::apply: zeros, a value per channel, noise per pixel; never padding; the clean split") {
  // Two samples of a 6x5 grid padded to 36 patches of 4x4 pixels, 3 channels.
  const Grid g = grid(6, 5, 6);
  const at::Tensor coord = g.coord.unsqueeze(0).repeat({4, 1, 1}), valid = g.valid.unsqueeze(0).repeat({4, 1});
  for (const std::string mode : {"const", "rand", "pixel"}) {
    for (const std::string spatial : {"region", "patch"}) {
      CAPTURE(mode);
      CAPTURE(spatial);
      PatchRandomErasingOptions o;
      o.spatial_mode = spatial;
      o.erasing.probability = 1.0;
      o.erasing.mode = mode;
      o.erasing.max_count = 2;
      o.erasing.num_splits = 2;  // samples 0 and 1 stay clean
      const PatchRandomErasing erasing(o);
      at::Tensor patches = at::ones({4, 36, 4 * 4 * 3});
      Rng rng(11);
      erasing.apply(patches, coord, valid, 3, rng);
      const at::Tensor changed = patches.ne(1.0).any(2);  // (B, N)
      CHECK_FALSE(changed[0].any().item<bool>());
      CHECK_FALSE(changed[1].any().item<bool>());
      CHECK(changed[2].any().item<bool>());
      CHECK(changed[3].any().item<bool>());
      CHECK_FALSE(changed.slice(1, 30).any().item<bool>());  // padding
      CHECK(at::isfinite(patches).all().item<bool>());
      const at::Tensor erased = patches.index({changed});  // (E, 48)
      const at::Tensor per_pixel = erased.view({-1, 16, 3});
      if (mode == "const") {
        CHECK(erased.eq(0.0).all().item<bool>());
      } else if (mode == "rand") {
        // Every pixel of an erased patch holds its erasure's 3 channel values.
        CHECK(per_pixel.eq(per_pixel.select(1, 0).unsqueeze(1)).all().item<bool>());
      } else {
        CHECK_FALSE(per_pixel.eq(per_pixel.select(1, 0).unsqueeze(1)).all().item<bool>());
      }
      // The same seed erases the same way.
      at::Tensor again = at::ones({4, 36, 48});
      Rng rng2(11);
      erasing.apply(again, coord, valid, 3, rng2);
      CHECK(at::equal(again, patches));
    }
  }
}

TEST_CASE("PatchRandomErasing: bad settings are usage errors naming them") {
  PatchRandomErasingOptions o;
  o.spatial_mode = "blob";
  CHECK_THROWS_WITH_AS(PatchRandomErasing{o}, doctest::Contains("spatial mode 'blob' is not one of region, patch"),
                       UsageError);
  o.spatial_mode = "region";
  o.erasing.mode = "noise";
  CHECK_THROWS_WITH_AS(PatchRandomErasing{o}, doctest::Contains("'noise' is not one of const, rand, pixel"),
                       UsageError);
  o.erasing.mode = "const";
  o.erasing.min_area = 0.5;
  o.erasing.max_area = 0.2;
  CHECK_THROWS_WITH_AS(PatchRandomErasing{o}, doctest::Contains("expected 0 < min_area <= max_area"), UsageError);
}

}  // namespace test_naflex_erasing
