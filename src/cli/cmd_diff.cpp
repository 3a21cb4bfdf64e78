// memsight diff: what changed between two snapshots, or two moments of one.
#include <cstdio>
#include <optional>

#include "cli/cli.h"
#include "memsight/diff.h"
#include "memsight/error.h"

namespace memsight::cli {
namespace {

// --device D or --device A,B.
std::pair<long, long> parse_devices(const std::string& v) {
  auto one = [&](const std::string& s) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 6)
      throw Error("--device takes a device number or two (BEFORE's,AFTER's), not '" + v + "'");
    return std::stol(s);
  };
  size_t comma = v.find(',');
  if (comma == std::string::npos) return {one(v), one(v)};
  return {one(v.substr(0, comma)), one(v.substr(comma + 1))};
}

}  // namespace

int cmd_diff(const Args& a) {
  // --at and --at-step keep their order: the first is BEFORE's moment.
  std::vector<std::string> moments;
  for (const auto& [name, value] : a.options) {
    if (name == "--at") moments.push_back(value);
    if (name != "--at-step") continue;
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
      throw Error("--at-step takes a step number, not '" + value + "'");
    moments.push_back("step:" + value);
  }
  expect_positional(a, 1, 2);
  const bool two_files = a.positional.size() == 2;
  std::pair<std::string, std::string> at;
  try {
    at = diff_plan(two_files, moments);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (--at MOMENT, --at-step N)");
  }
  const auto& [at_before, at_after] = at;
  const bool json = a.has("--json");
  const std::string out = a.get("--output", "-");
  const std::string format =
      output_format("diff", out, {"text", "json", "svg", "html", "folded"}, json ? "json" : "text",
                    {.flag = json ? "--json" : nullptr});
  const std::string& file_a = a.positional[0];
  const std::string& file_b = two_files ? a.positional[1] : file_a;
  const bool allow = a.has("--allow-mismatch");
  std::optional<std::pair<long, long>> devices;
  if (a.has("--device")) devices = parse_devices(a.get("--device"));
  const UserCode user_code = UserCode::parse(a.get("--user-code"));

  // Each snapshot is read, measured and let go before the next is read.
  auto device_of = [&](const Snapshot& snap, bool first) {
    if (devices) return static_cast<size_t>(first ? devices->first : devices->second);
    return default_device(snap).first;
  };
  std::vector<DiffMoment> side;
  size_t dev_a = 0;
  {
    Snapshot snap = load(file_a);
    dev_a = device_of(snap, true);
    const size_t dev_after = two_files ? dev_a : device_of(snap, false);
    if (two_files)
      side = measure_moments(snap, file_a, dev_a, {at_before}, user_code);
    else if (dev_after == dev_a)  // both moments from one replay
      side = measure_moments(snap, file_a, dev_a, {at_before, at_after}, user_code);
    else
      side = {measure_moments(snap, file_a, dev_a, {at_before}, user_code)[0],
              measure_moments(snap, file_a, dev_after, {at_after}, user_code)[0]};
  }
  if (two_files) {
    Snapshot snap = load(file_b);
    size_t dev_b = device_of(snap, false);
    auto b = measure_moments(snap, file_b, dev_b, {at_after}, user_code);
    side.push_back(std::move(b[0]));
  }
  if (std::string why = mismatch(side[0], side[1]); !why.empty() && !allow)
    throw Error(why + "; pass --allow-mismatch to compare them anyway" +
                (devices || side[0].device == side[1].device
                     ? ""
                     : ", or --device N to compare device N of both"));
  SnapshotDiff d = diff_moments(std::move(side[0]), std::move(side[1]));
  std::string text;
  if (format == "json")
    text = diff_json(d);
  else if (format == "svg")
    text = diff_svg(d);
  else if (format == "html")
    text = diff_html(d, two_files ? file_a + " -> " + file_b : file_a);
  else if (format == "folded")
    text = diff_folded(d).text;
  else
    text = diff_text(d);
  write_output(out, text);
  if (out != "-" && (format == "svg" || format == "html"))
    std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

}  // namespace memsight::cli
