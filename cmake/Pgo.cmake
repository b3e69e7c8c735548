# Profile-guided optimisation (issue #6): -DAGTRACE_PGO=ON.
#
# agtrace's time per operation is spent in many small, branchy functions (the interpreter,
# the autograd engine, the accountant and the holder index, each a few per cent of a long
# chain's run). GCC lays such code out and inlines it much better when it knows which
# branches a real run takes: with a profile from the bundled scenarios the 10,000-op
# tiny_chain (not one of them) ran 8 % fewer instructions in 0.85-0.90x the time
# (bench/README.md).
#
# The build then has two stages, both driven from this build tree:
#   1. pgo/train-build: the same sources and options, compiled with -fprofile-generate
#      (only the agtrace executable is built there);
#   2. that agtrace runs every scenario in scenarios/ (cmake/PgoTrain.cmake), writing the
#      profile to pgo/profile;
#   3. this build compiles every C++ object with -fprofile-use from pgo/profile.
# Any source change rebuilds the instrumented agtrace, trains again, and recompiles here, so
# the profile never describes other sources than the ones compiled. -fprofile-partial-training:
# code the training never ran (CUDA, ops no bundled scenario uses) is optimised as in a build
# without a profile, not for size. The profile changes speed only: a PGO build's reports are
# byte for byte those of a plain build (scripts/pgo-check compares them).
#
# -fprofile-prefix-path: the profile files are named after the object paths relative to each
# build tree, so that stage 1's files are found from stage 3's objects.
#
# Included before any target: inside stage 1 (AGTRACE_PGO_GENERATE_DIR set by stage 3's
# configure) it adds the instrumentation flags; agtrace_enable_pgo() below does the rest.
option(AGTRACE_PGO "Profile-guided build: train an instrumented agtrace on the bundled scenarios first (GCC)" OFF)
set(AGTRACE_PGO_GENERATE_DIR "" CACHE PATH "Internal: write a training profile to this directory (stage 1 of AGTRACE_PGO)")
mark_as_advanced(AGTRACE_PGO_GENERATE_DIR)

if(AGTRACE_PGO_GENERATE_DIR)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fprofile-generate=${AGTRACE_PGO_GENERATE_DIR}>
                      $<$<COMPILE_LANGUAGE:CXX>:-fprofile-update=prefer-atomic>
                      $<$<COMPILE_LANGUAGE:CXX>:-fprofile-prefix-path=${CMAKE_BINARY_DIR}>)
  add_link_options(-fprofile-generate=${AGTRACE_PGO_GENERATE_DIR})
  return()
endif()

# Called once every target exists (the top-level CMakeLists.txt, at its end), with the
# targets whose objects read the profile.
function(agtrace_enable_pgo)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    message(FATAL_ERROR "AGTRACE_PGO=ON needs GCC (its -fprofile-use profile format); compiler: ${CMAKE_CXX_COMPILER_ID}")
  endif()
  if(AGTRACE_FUZZ OR CMAKE_CXX_FLAGS MATCHES "-fsanitize")
    message(FATAL_ERROR "AGTRACE_PGO=ON is for release builds, not sanitized or fuzzing ones")
  endif()

  include(ExternalProject)
  set(AGTRACE_PGO_DIR ${CMAKE_BINARY_DIR}/pgo)
  set(AGTRACE_PGO_PROFILE_DIR ${AGTRACE_PGO_DIR}/profile)
  set(AGTRACE_PGO_TRAIN_BUILD ${AGTRACE_PGO_DIR}/train-build)
  set(AGTRACE_PGO_STAMP ${AGTRACE_PGO_DIR}/trained.stamp)
  # Everything that decides what the compiler sees, passed on so that both stages compile the
  # same code (a profile only fits the objects it was made from).
  string(TOUPPER "${CMAKE_BUILD_TYPE}" build_type)
  set(AGTRACE_PGO_STAGE1_ARGS
    -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE}
    -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
    "-DCMAKE_CXX_FLAGS=${CMAKE_CXX_FLAGS}"
    "-DCMAKE_CXX_FLAGS_${build_type}=${CMAKE_CXX_FLAGS_${build_type}}"
    -DAGTRACE_PGO=OFF
    -DAGTRACE_PGO_GENERATE_DIR=${AGTRACE_PGO_PROFILE_DIR}
    -DAGTRACE_TESTS=OFF
    -DAGTRACE_CUDA=${AGTRACE_CUDA}
    -DAGTRACE_SMALL_OBJECT_POOL=${AGTRACE_SMALL_OBJECT_POOL}
    -DAGTRACE_BUNDLE_DIR=${AGTRACE_BUNDLE_DIR})
  if(CMAKE_CUDA_COMPILER)
    list(APPEND AGTRACE_PGO_STAGE1_ARGS -DCMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER})
  endif()
  if(DEFINED CMAKE_CUDA_ARCHITECTURES)
    list(APPEND AGTRACE_PGO_STAGE1_ARGS "-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}")
  endif()
  ExternalProject_Add(agtrace_pgo_instrumented
    SOURCE_DIR ${CMAKE_SOURCE_DIR}
    BINARY_DIR ${AGTRACE_PGO_TRAIN_BUILD}
    CMAKE_ARGS ${AGTRACE_PGO_STAGE1_ARGS}
    BUILD_COMMAND ${CMAKE_COMMAND} --build ${AGTRACE_PGO_TRAIN_BUILD} --target agtrace
    BUILD_BYPRODUCTS ${AGTRACE_PGO_TRAIN_BUILD}/agtrace
    INSTALL_COMMAND ""
    BUILD_ALWAYS ON  # its own build decides what is out of date
    USES_TERMINAL_BUILD ON)
  # The bundled scenarios only, not bench/scenarios: the benchmarks then time code trained on
  # other programs, as a user's own scenarios are (training on the benchmarks too gave 4 % fewer
  # instructions on tiny_chain, 218.6M against 227.6M, and the same time within noise).
  file(GLOB AGTRACE_PGO_SCENARIOS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/scenarios/*.json)
  string(REPLACE ";" "|" scenario_arg "${AGTRACE_PGO_SCENARIOS}")  # one shell word
  add_custom_command(OUTPUT ${AGTRACE_PGO_STAMP}
    COMMAND ${CMAKE_COMMAND} -DAGTRACE=${AGTRACE_PGO_TRAIN_BUILD}/agtrace -DPROFILE_DIR=${AGTRACE_PGO_PROFILE_DIR}
            -DSTAMP=${AGTRACE_PGO_STAMP} -DSCENARIOS=${scenario_arg} -P ${CMAKE_SOURCE_DIR}/cmake/PgoTrain.cmake
    DEPENDS ${AGTRACE_PGO_TRAIN_BUILD}/agtrace ${AGTRACE_PGO_SCENARIOS} ${CMAKE_SOURCE_DIR}/cmake/PgoTrain.cmake
    COMMENT "PGO: training the instrumented agtrace on the bundled scenarios"
    USES_TERMINAL VERBATIM)
  add_custom_target(agtrace_pgo_profile DEPENDS ${AGTRACE_PGO_STAMP})
  add_dependencies(agtrace_pgo_profile agtrace_pgo_instrumented)

  # Stage 3: every C++ object of the targets reads the profile and is rebuilt when it changes.
  # GCC's -Wmissing-profile stays on: every object of agtrace has a profile (the training
  # binary writes one per object it links, run or not), so the warning means the two stages
  # no longer name their files alike (scripts/pgo-check fails on it). The benchmark harness's
  # own main, which the training never links, turns it off for itself (bench/CMakeLists.txt).
  set(use_flags -fprofile-use=${AGTRACE_PGO_PROFILE_DIR} -fprofile-partial-training
      -fprofile-prefix-path=${CMAKE_BINARY_DIR})
  foreach(target IN LISTS ARGN)
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${use_flags}>")
    add_dependencies(${target} agtrace_pgo_profile)
    get_target_property(sources ${target} SOURCES)
    set_property(SOURCE ${sources} TARGET_DIRECTORY ${target} APPEND PROPERTY OBJECT_DEPENDS ${AGTRACE_PGO_STAMP})
    # A source generated into the build tree has another absolute path in each stage, which
    # GCC counts as a changed function (-Werror=coverage-mismatch): compiled without the
    # profile (the one there, the embedded torch_runner.py, is never hot).
    foreach(source IN LISTS sources)
      string(FIND "${source}" "${CMAKE_BINARY_DIR}/" at)  # a prefix test (the path is no regex)
      if(at EQUAL 0)
        set_property(SOURCE ${source} TARGET_DIRECTORY ${target} APPEND PROPERTY COMPILE_OPTIONS -fno-profile-use)
      endif()
    endforeach()
  endforeach()
  message(STATUS "agtrace: profile-guided build (training profile in ${AGTRACE_PGO_PROFILE_DIR})")
endfunction()
