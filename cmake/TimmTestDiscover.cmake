# Script mode, run after each test executable is linked (see TimmTest.cmake):
#   cmake -D TEST_EXECUTABLE=<exe> -D MANIFEST=<file> -D CTEST_FILE=<out>
#         -D WORKING_DIRECTORY=<dir> -D THREADS=<n> -P TimmTestDiscover.cmake
#
# Asks the doctest executable for its TEST_CASEs (XML: name and file of each)
# and writes one add_test per TEST_CASE to CTEST_FILE, named
# "<manifest name>: <TEST_CASE name>", with the manifest's labels and
# timeout for that file. Each test runs its case alone, selected by name and
# file, case-sensitively; test_main.cpp fails a run that selects no case, so
# a filter that stopped matching cannot pass silently. Each test runs with
# OMP_NUM_THREADS=<THREADS> (see TIMM_TEST_THREADS in TimmTest.cmake).
cmake_minimum_required(VERSION 3.25)

foreach(var TEST_EXECUTABLE MANIFEST CTEST_FILE WORKING_DIRECTORY THREADS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "TimmTestDiscover.cmake: -D ${var}=... is required")
  endif()
endforeach()

# The manifest: one line per source file, "name<TAB>file<TAB>labels<TAB>timeout".
file(STRINGS "${MANIFEST}" manifest_lines)
set(known_files)
foreach(line IN LISTS manifest_lines)
  if(line STREQUAL "")
    continue()
  endif()
  string(REPLACE "\t" ";" fields "${line}")
  list(GET fields 0 name)
  list(GET fields 1 file)
  list(GET fields 2 labels)
  list(GET fields 3 timeout)
  string(REPLACE "," ";" labels "${labels}")
  set(name_of_${file} "${name}")
  set(labels_of_${file} "${labels}")
  set(timeout_of_${file} "${timeout}")
  # ctest --parallel starts the costliest tests first; until a run has
  # measured them (Testing/Temporary/CTestCostData.txt), the label is the
  # estimate, so that a fresh build does not end on a long e2e test alone.
  if("e2e" IN_LIST labels)
    set(cost_of_${file} 100)
  elseif("parity" IN_LIST labels OR "multiprocess" IN_LIST labels)
    set(cost_of_${file} 10)
  else()
    set(cost_of_${file} 1)
  endif()
  list(APPEND known_files "${file}")
endforeach()

execute_process(
  COMMAND "${TEST_EXECUTABLE}" --list-test-cases --reporters=xml --no-version
  OUTPUT_VARIABLE listing
  ERROR_VARIABLE listing_errors
  RESULT_VARIABLE result
  WORKING_DIRECTORY "${WORKING_DIRECTORY}")
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --list-test-cases failed (${result}):\n${listing}\n${listing_errors}")
endif()

function(xml_unescape out text)
  string(REPLACE "&quot;" "\"" text "${text}")
  string(REPLACE "&apos;" "'" text "${text}")
  string(REPLACE "&lt;" "<" text "${text}")
  string(REPLACE "&gt;" ">" text "${text}")
  string(REPLACE "&amp;" "&" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

function(restore out text)
  string(REPLACE "@SEMICOLON@" ";" text "${text}")
  string(REPLACE "@LBRACKET@" "[" text "${text}")
  string(REPLACE "@RBRACKET@" "]" text "${text}")
  xml_unescape(text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# A CMake bracket argument that holds `text` whatever it contains.
function(bracket out text)
  set(eq "=")
  while(text MATCHES "\\]${eq}\\]")
    string(APPEND eq "=")
  endwhile()
  set(${out} "[${eq}[${text}]${eq}]" PARENT_SCOPE)
endfunction()

# Semicolons and square brackets would split or join CMake list elements:
# protect them while parsing.
string(REPLACE ";" "@SEMICOLON@" listing "${listing}")
string(REPLACE "[" "@LBRACKET@" listing "${listing}")
string(REPLACE "]" "@RBRACKET@" listing "${listing}")
# Attribute values are quoted (a quote inside is &quot;), but a '>' may stand
# unescaped inside one: match attribute by attribute.
string(REGEX MATCHALL "<TestCase( [a-z_]+=\"[^\"]*\")+" cases "${listing}")
set(script "")
set(count 0)
set(seen)
foreach(case IN LISTS cases)
  if(NOT case MATCHES "name=\"([^\"]*)\"")
    message(FATAL_ERROR "unexpected doctest listing entry: ${case}")
  endif()
  restore(case_name "${CMAKE_MATCH_1}")
  if(NOT case MATCHES "filename=\"([^\"]*)\"")
    message(FATAL_ERROR "doctest listed no file for TEST_CASE \"${case_name}\"")
  endif()
  restore(case_file "${CMAKE_MATCH_1}")
  cmake_path(GET case_file FILENAME file)
  if(NOT file IN_LIST known_files)
    message(FATAL_ERROR "TEST_CASE \"${case_name}\" is in ${case_file}, which no timm_add_test of "
                        "${TEST_EXECUTABLE} names")
  endif()
  set(test_name "${name_of_${file}}: ${case_name}")
  if(test_name IN_LIST seen)
    message(FATAL_ERROR "two TEST_CASEs of ${file} are named \"${case_name}\": names must be unique per file")
  endif()
  list(APPEND seen "${test_name}")
  # doctest's filters split at commas unless escaped; * and ? stay wildcards,
  # which the file filter and case sensitivity keep from matching another case.
  string(REPLACE "\\" "\\\\" filter "${case_name}")
  string(REPLACE "," "\\," filter "${filter}")
  bracket(q_name "${test_name}")
  bracket(q_exe "${TEST_EXECUTABLE}")
  bracket(q_case "--test-case=${filter}")
  bracket(q_file "--source-file=*/${file}")
  bracket(q_dir "${WORKING_DIRECTORY}")
  bracket(q_labels "${labels_of_${file}}")
  string(APPEND script
    "add_test(${q_name} ${q_exe} ${q_case} ${q_file} --case-sensitive=true --no-version)\n"
    "set_tests_properties(${q_name} PROPERTIES WORKING_DIRECTORY ${q_dir} "
    "LABELS ${q_labels} TIMEOUT ${timeout_of_${file}} COST ${cost_of_${file}} "
    "ENVIRONMENT OMP_NUM_THREADS=${THREADS})\n")
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} lists no TEST_CASE")
endif()

# Written through a temporary file, so ctest never reads half a list.
file(WRITE "${CTEST_FILE}.tmp" "${script}")
file(RENAME "${CTEST_FILE}.tmp" "${CTEST_FILE}")
