# Stage 2 of AGTRACE_PGO (cmake/Pgo.cmake), run as a script:
#   cmake -DAGTRACE=<instrumented agtrace> -DPROFILE_DIR=<dir> -DSTAMP=<file> -DSCENARIOS=<a|b|...> -P PgoTrain.cmake
# Starts from an empty profile directory (a profile left by older sources would be merged
# into the new one), runs every scenario the way users do (`agtrace run`, text and JSON
# reports; not --profile, whose timing branches a plain run never takes), and fails the build
# if any run fails: a profile from a broken run would describe the error path.
foreach(var AGTRACE PROFILE_DIR STAMP SCENARIOS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "PgoTrain.cmake: -D${var}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" SCENARIOS "${SCENARIOS}")
file(REMOVE_RECURSE ${PROFILE_DIR})
file(MAKE_DIRECTORY ${PROFILE_DIR})
file(REMOVE ${STAMP})
set(runs 0)
foreach(scenario IN LISTS SCENARIOS)
  foreach(args "--format;text" "--format;json")
    execute_process(COMMAND ${AGTRACE} run ${scenario} ${args}
                    OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "PGO training: `agtrace run ${scenario} ${args}` failed (${rc}): ${err}")
    endif()
    math(EXPR runs "${runs} + 1")
  endforeach()
endforeach()
file(GLOB_RECURSE profiles ${PROFILE_DIR}/*.gcda)
list(LENGTH profiles count)
if(count EQUAL 0)
  message(FATAL_ERROR "PGO training: ${runs} runs wrote no profile to ${PROFILE_DIR}")
endif()
message(STATUS "PGO training: ${runs} runs, ${count} profile files")
file(WRITE ${STAMP} "${runs} runs, ${count} profile files\n")
