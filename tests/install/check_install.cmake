# `cmake --install` into a fresh folder under the build tree, then what a user gets there:
# bin/agtrace runs and names its git commit, the man page has a section per subcommand,
# and the bash completion completes a subcommand and an option. Script mode:
#   cmake -DBUILD_DIR=build -DSOURCE_DIR=src -DPREFIX=dir -P tests/install/check_install.cmake
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
foreach(f bin/agtrace share/man/man1/agtrace.1 share/bash-completion/completions/agtrace
          share/zsh/vendor-completions/_agtrace)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()

execute_process(COMMAND ${PREFIX}/bin/agtrace --version OUTPUT_VARIABLE version RESULT_VARIABLE rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
# The commit it names is one of this checkout's (the build may be older than HEAD when
# commits were made since the last build).
execute_process(COMMAND git -C ${SOURCE_DIR} rev-parse --git-dir RESULT_VARIABLE git_rc OUTPUT_QUIET ERROR_QUIET)
if(git_rc EQUAL 0)
  if(NOT version MATCHES "^agtrace [0-9.]+ \\(git ([0-9a-f]+)(-dirty)?\\)$")
    message(FATAL_ERROR "--version says '${version}': no git commit")
  endif()
  set(commit ${CMAKE_MATCH_1})
  string(LENGTH "${commit}" commit_length)
  execute_process(COMMAND git -C ${SOURCE_DIR} cat-file -e ${commit}^{commit} RESULT_VARIABLE known ERROR_QUIET)
  if(NOT commit_length EQUAL 12 OR NOT known EQUAL 0)
    message(FATAL_ERROR "--version says '${version}': ${commit} is not a commit of ${SOURCE_DIR}")
  endif()
elseif(NOT version MATCHES "^agtrace [0-9.]+ \\(git unknown\\)$")
  message(FATAL_ERROR "--version says '${version}' outside a git checkout")
endif()

execute_process(COMMAND ${PREFIX}/bin/agtrace --help OUTPUT_VARIABLE root_help)
file(READ ${PREFIX}/share/man/man1/agtrace.1 man)
foreach(sub run check validate ops export diff)
  if(NOT root_help MATCHES "\n  ${sub} ")
    message(FATAL_ERROR "agtrace --help does not list '${sub}'")
  endif()
  if(NOT man MATCHES "\n\\.SS agtrace ${sub}\n")
    message(FATAL_ERROR "the man page has no section for '${sub}'")
  endif()
endforeach()

set(completion ${PREFIX}/share/bash-completion/completions/agtrace)
execute_process(COMMAND bash -c "source '${completion}'; COMP_WORDS=(agtrace ch); COMP_CWORD=1; _agtrace; echo \"\${COMPREPLY[*]}\"; COMP_WORDS=(agtrace check --ju); COMP_CWORD=2; _agtrace; echo \"\${COMPREPLY[*]}\""
                OUTPUT_VARIABLE completed RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT completed STREQUAL "check\n--junit\n")
  message(FATAL_ERROR "bash completion gave '${completed}' (rc ${rc}); expected 'check' then '--junit'")
endif()
message(STATUS "installed: ${version}")
