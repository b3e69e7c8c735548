# The header-only dependencies from AGTRACE_BUNDLE_DIR (made by scripts/gpu-bundle from
# Debian's packages), as the imported targets find_package would give: a machine with a GPU
# and no package registry builds agtrace with them (scripts/gpu-check). Included from the
# "bundled dependencies" section of the root CMakeLists.txt; tests/CMakeLists.txt skips its
# find_package(Catch2) when Catch2::Catch2 exists.
get_filename_component(AGTRACE_BUNDLE_DIR "${AGTRACE_BUNDLE_DIR}" ABSOLUTE BASE_DIR "${CMAKE_BINARY_DIR}")
set(_bundle_manifest "${AGTRACE_BUNDLE_DIR}/MANIFEST")
if(NOT EXISTS "${_bundle_manifest}")
  message(FATAL_ERROR "AGTRACE_BUNDLE_DIR=${AGTRACE_BUNDLE_DIR} is not a bundle (no MANIFEST): run scripts/gpu-bundle")
endif()
file(STRINGS "${_bundle_manifest}" _bundle_lines)

# The major versions the find_package calls ask for: nlohmann_json 3, Catch2 2.
function(_agtrace_bundle_version pkg major)
  foreach(line IN LISTS _bundle_lines)
    if(line MATCHES "^${pkg} ([^ ]+) ")
      set(v "${CMAKE_MATCH_1}")
      string(REGEX REPLACE "^[0-9]+:" "" v "${v}")  # Debian epoch
      if(NOT v MATCHES "^${major}\\.")
        message(FATAL_ERROR "bundle: ${pkg} ${v} is not version ${major}.x")
      endif()
      message(STATUS "agtrace: bundled ${pkg} ${v}")
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "bundle: ${_bundle_manifest} lists no ${pkg}")
endfunction()
_agtrace_bundle_version(nlohmann-json3-dev 3)
_agtrace_bundle_version(libcli11-dev 2)
_agtrace_bundle_version(libspdlog-dev 1)
_agtrace_bundle_version(libfmt-dev 9)
_agtrace_bundle_version(catch2 2)

set(_bundle_include "${AGTRACE_BUNDLE_DIR}/include")
foreach(h nlohmann/json.hpp CLI/CLI.hpp spdlog/spdlog.h fmt/format.h catch2/catch.hpp)
  if(NOT EXISTS "${_bundle_include}/${h}")
    message(FATAL_ERROR "bundle: ${_bundle_include}/${h} is missing: run scripts/gpu-bundle again")
  endif()
endforeach()

# Imported targets' include directories are system directories (-isystem): searched before
# /usr/include, so where the Debian packages are also installed the bundle's copies win.
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED GLOBAL)
set_target_properties(nlohmann_json::nlohmann_json PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${_bundle_include}")
add_library(CLI11::CLI11 INTERFACE IMPORTED GLOBAL)
set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_bundle_include}")
# Debian's spdlog is a shared library configured with SPDLOG_FMT_EXTERNAL (tweakme.h) over
# Debian's libfmt; without SPDLOG_COMPILED_LIB its headers are the header-only library, and
# FMT_HEADER_ONLY makes fmt header-only too, so no .so has to travel.
add_library(spdlog::spdlog INTERFACE IMPORTED GLOBAL)
set_target_properties(spdlog::spdlog PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${_bundle_include}"
  INTERFACE_COMPILE_DEFINITIONS "SPDLOG_FMT_EXTERNAL;FMT_HEADER_ONLY")
find_package(Threads REQUIRED)
set_property(TARGET spdlog::spdlog PROPERTY INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(Catch2::Catch2 INTERFACE IMPORTED GLOBAL)
set_target_properties(Catch2::Catch2 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_bundle_include}")
# include(Catch) -> catch_discover_tests, from the bundle.
list(PREPEND CMAKE_MODULE_PATH "${AGTRACE_BUNDLE_DIR}/cmake")
message(STATUS "agtrace: dependencies from the bundle ${AGTRACE_BUNDLE_DIR}")
