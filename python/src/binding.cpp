#include "binding.h"

#include <unordered_map>
#include <utility>

namespace memsight::py_binding {

py::str text(const std::string& s) {
  PyObject* o =
      PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

std::string from_text(const py::str& s) {
  PyObject* o = PyUnicode_AsEncodedString(s.ptr(), "utf-8", "surrogateescape");
  if (!o) throw py::error_already_set();
  auto b = py::reinterpret_steal<py::bytes>(o);
  return std::string(b);
}

std::string_view as_view(const py::buffer_info& info) {
  if (info.ndim > 1) throw py::value_error("expected a one-dimensional bytes-like object");
  return {static_cast<const char*>(info.ptr), static_cast<size_t>(info.size * info.itemsize)};
}

// torch writes a frame name as is, so one with a newline makes the text
// ambiguous; the stacks are not. Lines of one stack (every block of one
// allocation site) share its str.
py::tuple folded_with_stacks(const std::string& folded, const std::vector<FoldedLine>& lines) {
  py::list stacks(lines.size());
  std::unordered_map<std::string_view, py::str> made;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view stack = std::string_view(folded).substr(lines[i].begin, lines[i].size);
    auto it = made.find(stack);
    if (it == made.end()) it = made.emplace(stack, text(std::string(stack))).first;
    stacks[i] = py::make_tuple(it->second, lines[i].count);
  }
  return py::make_tuple(text(folded), std::move(stacks));
}

}  // namespace memsight::py_binding
