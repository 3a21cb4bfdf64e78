#pragma once
// Transparent huge pages for big tables that are reserved once and filled
// front to back: one fault per 2 MB instead of one per 4 KB page. Only
// advice; pages are still allocated when first touched.
#include <cstddef>

namespace memsight {

void advise_huge_pages(const void* data, size_t bytes);

template <typename Vec>
void advise_huge_pages(const Vec& v) {
  advise_huge_pages(v.data(), v.capacity() * sizeof(typename Vec::value_type));
}

}  // namespace memsight
