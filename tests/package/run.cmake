# Package test, run by ctest (tests/CMakeLists.txt) as
#   cmake -DSOURCE_DIR=<repo> -DBUILD_DIR=<main build dir> -DWORK_DIR=<scratch dir> -P tests/package/run.cmake
#
# Proves two things, failing with FATAL_ERROR when either does not hold:
#  1. find_package(sqlock) works from an install prefix: BUILD_DIR is installed into
#     WORK_DIR/prefix and tests/package/consumer is configured, built and run against it
#     (an SQLite round trip: migrate, try_acquire, a second client finds the key held, release).
#  2. A build without the PostgreSQL and MySQL backends still compiles, installs and links,
#     and opening a postgresql:// or mysql:// URL throws sqlock::config_error naming the
#     CMake option that brings the backend in.
#  3. A project that takes sqlock in with add_subdirectory gets sqlock::sqlock, and neither
#     sqlock's tests nor its CPack settings (configured only: nothing is built).
#
# The nested builds use Release and the main build's compiler, flags and generator; when the
# main build has SQLOCK_SANITIZE=ON, so do they (the consumer gets -fsanitize=... itself,
# since sqlock does not export its sanitizer flags).
cmake_minimum_required(VERSION 3.22)

string(TIMESTAMP started "%s")

function(fail)
  string(JOIN "" text ${ARGN})
  message(FATAL_ERROR "package test FAILED: ${text}")
endfunction()

# ---------------------------------------------------------------------------
# Arguments and the main build's settings.
foreach(var IN ITEMS SOURCE_DIR BUILD_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    fail("-D${var}=... is required. Usage: cmake -DSOURCE_DIR=<repo> -DBUILD_DIR=<build> "
         "-DWORK_DIR=<scratch> -P tests/package/run.cmake")
  endif()
  get_filename_component(${var} "${${var}}" ABSOLUTE)
endforeach()

if(NOT EXISTS "${SOURCE_DIR}/CMakeLists.txt" OR NOT EXISTS "${SOURCE_DIR}/tests/package/consumer/CMakeLists.txt")
  fail("SOURCE_DIR=${SOURCE_DIR} is not the sqlock source tree")
endif()
if(NOT EXISTS "${BUILD_DIR}/CMakeCache.txt")
  fail("BUILD_DIR=${BUILD_DIR} is not a configured build directory (no CMakeCache.txt)")
endif()
# WORK_DIR is wiped: refuse anything that would take the sources or the build with it.
foreach(precious IN ITEMS "${SOURCE_DIR}" "${BUILD_DIR}")
  string(FIND "${precious}/" "${WORK_DIR}/" at)
  if(at EQUAL 0 OR WORK_DIR STREQUAL "/")
    fail("WORK_DIR=${WORK_DIR} would take ${precious} with it when wiped (refusing)")
  endif()
endforeach()

load_cache("${BUILD_DIR}" READ_WITH_PREFIX MAIN_
  SQLOCK_SANITIZE CMAKE_GENERATOR CMAKE_MAKE_PROGRAM CMAKE_CXX_COMPILER
  CMAKE_CXX_FLAGS CMAKE_EXE_LINKER_FLAGS CMAKE_PREFIX_PATH)

# Settings shared by every nested configure. (No element may contain a ';': they pass
# through ARGN lists below.)
set(common_args -G "${MAIN_CMAKE_GENERATOR}" -DCMAKE_BUILD_TYPE=Release)
if(MAIN_CMAKE_MAKE_PROGRAM AND NOT MAIN_CMAKE_MAKE_PROGRAM MATCHES "-NOTFOUND$")
  list(APPEND common_args "-DCMAKE_MAKE_PROGRAM=${MAIN_CMAKE_MAKE_PROGRAM}")
endif()
if(MAIN_CMAKE_CXX_COMPILER)
  list(APPEND common_args "-DCMAKE_CXX_COMPILER=${MAIN_CMAKE_CXX_COMPILER}")
endif()
# Wherever the main build found spdlog & co., the nested builds look too: a list cannot
# ride on the command line here, so it goes through the environment.
if(MAIN_CMAKE_PREFIX_PATH)
  string(REPLACE ";" ":" extra_prefixes "${MAIN_CMAKE_PREFIX_PATH}")
  if(DEFINED ENV{CMAKE_PREFIX_PATH} AND NOT "$ENV{CMAKE_PREFIX_PATH}" STREQUAL "")
    string(APPEND extra_prefixes ":$ENV{CMAKE_PREFIX_PATH}")
  endif()
  set(ENV{CMAKE_PREFIX_PATH} "${extra_prefixes}")
endif()

set(lib_flags "${MAIN_CMAKE_CXX_FLAGS}")
set(consumer_flags "${MAIN_CMAKE_CXX_FLAGS}")
set(consumer_link_flags "${MAIN_CMAKE_EXE_LINKER_FLAGS}")
set(lib_args -DSQLOCK_SANITIZE=OFF)
if(MAIN_SQLOCK_SANITIZE)
  set(lib_args -DSQLOCK_SANITIZE=ON)
  string(APPEND consumer_flags " -fsanitize=address,undefined -fno-omit-frame-pointer")
  string(APPEND consumer_link_flags " -fsanitize=address,undefined")
endif()
string(STRIP "${lib_flags}" lib_flags)
string(STRIP "${consumer_flags}" consumer_flags)
string(STRIP "${consumer_link_flags}" consumer_link_flags)
list(APPEND lib_args "-DCMAKE_CXX_FLAGS=${lib_flags}" "-DCMAKE_EXE_LINKER_FLAGS=${MAIN_CMAKE_EXE_LINKER_FLAGS}")
set(consumer_args "-DCMAKE_CXX_FLAGS=${consumer_flags}" "-DCMAKE_EXE_LINKER_FLAGS=${consumer_link_flags}")

message(STATUS "package test: SOURCE_DIR=${SOURCE_DIR}")
message(STATUS "package test: BUILD_DIR=${BUILD_DIR} (SQLOCK_SANITIZE=${MAIN_SQLOCK_SANITIZE})")
message(STATUS "package test: WORK_DIR=${WORK_DIR}")

# ---------------------------------------------------------------------------
# Helpers.

# run(<what> <command...>): runs a command, output to the log, fails unless it exits 0.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc COMMAND_ECHO STDOUT)
  if(NOT rc STREQUAL "0")
    fail("${what} failed (exit: ${rc})")
  endif()
endfunction()

function(elapsed out)
  string(TIMESTAMP now "%s")
  math(EXPR secs "${now} - ${started}")
  set(${out} "${secs}s" PARENT_SCOPE)
endfunction()

# check_config(<prefix>): the prefix holds sqlockConfig.cmake; its path goes to sqlock_config_dir.
function(check_config prefix)
  file(GLOB_RECURSE configs "${prefix}/*/sqlockConfig.cmake")
  if(NOT configs)
    fail("installing into ${prefix} produced no sqlockConfig.cmake")
  endif()
  list(GET configs 0 config)
  get_filename_component(dir "${config}" DIRECTORY)
  set(sqlock_config_dir "${dir}" PARENT_SCOPE)
endfunction()

# build_consumer(<prefix> <binary dir>): configures and builds tests/package/consumer
# against the sqlock installed in <prefix>, and checks it used that one.
function(build_consumer prefix bin)
  run("configuring the consumer against ${prefix} (find_package(sqlock CONFIG REQUIRED))"
      "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/package/consumer" -B "${bin}"
      ${common_args} ${consumer_args} "-DCMAKE_PREFIX_PATH=${prefix}"
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
  load_cache("${bin}" READ_WITH_PREFIX CONSUMER_ sqlock_DIR)
  string(FIND "${CONSUMER_sqlock_DIR}/" "${prefix}/" at)
  if(NOT at EQUAL 0)
    fail("the consumer found sqlock in '${CONSUMER_sqlock_DIR}', not in the prefix ${prefix}")
  endif()
  run("building the consumer against ${prefix} (headers and link dependencies of sqlock::sqlock)"
      "${CMAKE_COMMAND}" --build "${bin}" --parallel 2)
  if(NOT EXISTS "${bin}/consumer")
    fail("building ${bin} produced no consumer executable")
  endif()
endfunction()

# run_consumer(<what> <out-var> <args...>): runs the consumer, fails unless it exits 0,
# and returns its standard output.
function(run_consumer what out exe)
  execute_process(COMMAND "${exe}" ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr
    TIMEOUT 120 COMMAND_ECHO STDOUT)
  message(STATUS "consumer output:\n${stdout}${stderr}")
  if(NOT rc STREQUAL "0")
    fail("${what}: the consumer exited with '${rc}'\n${stdout}${stderr}")
  endif()
  set(${out} "${stdout}" PARENT_SCOPE)
endfunction()

# round_trip(<exe> <db>): the SQLite round trip must print a positive token and OK.
function(round_trip exe db)
  file(REMOVE "${db}" "${db}-wal" "${db}-shm" "${db}-journal")
  run_consumer("SQLite round trip on ${db}" out "${exe}" "${db}")
  if(NOT out MATCHES "(^|\n)token=[1-9][0-9]*\n")
    fail("the SQLite round trip printed no positive token:\n${out}")
  endif()
  if(NOT out MATCHES "(^|\n)OK\n")
    fail("the SQLite round trip did not finish:\n${out}")
  endif()
endfunction()

# ---------------------------------------------------------------------------
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# 1. find_package(sqlock) from the install prefix of the main build.
message(STATUS "package test [1/3]: find_package(sqlock) from an install of ${BUILD_DIR}")
set(prefix "${WORK_DIR}/prefix")
run("cmake --install ${BUILD_DIR} --prefix ${prefix}"
    "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
check_config("${prefix}")
message(STATUS "package test: installed config in ${sqlock_config_dir}")
build_consumer("${prefix}" "${WORK_DIR}/consumer")
round_trip("${WORK_DIR}/consumer/consumer" "${WORK_DIR}/consumer.db")
elapsed(t)
message(STATUS "package test [1/3] passed (${t})")

# 2. A build without the PostgreSQL and MySQL backends.
message(STATUS "package test [2/3]: a build with SQLOCK_WITH_POSTGRES=OFF and SQLOCK_WITH_MYSQL=OFF")
set(minimal "${WORK_DIR}/minimal")
set(minimal_prefix "${WORK_DIR}/minimal-prefix")
run("configuring sqlock without the PostgreSQL and MySQL backends"
    "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${minimal}" ${common_args} ${lib_args}
    -DSQLOCK_WITH_POSTGRES=OFF -DSQLOCK_WITH_MYSQL=OFF -DSQLOCK_WITH_SQLITE=ON
    -DSQLOCK_BUILD_TESTS=OFF -DSQLOCK_BUILD_EXAMPLES=OFF -DSQLOCK_BUILD_BENCH=OFF)
run("building sqlock without the PostgreSQL and MySQL backends"
    "${CMAKE_COMMAND}" --build "${minimal}" --parallel 2)
run("cmake --install ${minimal} --prefix ${minimal_prefix}"
    "${CMAKE_COMMAND}" --install "${minimal}" --prefix "${minimal_prefix}")
check_config("${minimal_prefix}")
# The export of a build without those backends must not drag their drivers in.
file(GLOB target_files "${sqlock_config_dir}/sqlockTargets*.cmake")
foreach(f IN LISTS target_files)
  file(READ "${f}" text)
  if(text MATCHES "PQXX|pqxx|libpq|mysqlcppconn")
    fail("${f} still refers to a PostgreSQL or MySQL driver in a build without those backends")
  endif()
endforeach()
build_consumer("${minimal_prefix}" "${WORK_DIR}/minimal-consumer")
set(exe "${WORK_DIR}/minimal-consumer/consumer")
round_trip("${exe}" "${WORK_DIR}/minimal.db")
foreach(case IN ITEMS
    "postgresql://x@127.0.0.1/db|SQLOCK_WITH_POSTGRES"
    "postgres://x@127.0.0.1:5432/db|SQLOCK_WITH_POSTGRES"
    "mysql://x@127.0.0.1/db|SQLOCK_WITH_MYSQL"
    "mariadb://x@127.0.0.1:3306/db|SQLOCK_WITH_MYSQL")
  string(REPLACE "|" ";" case "${case}")
  list(GET case 0 url)
  list(GET case 1 option)
  run_consumer("opening ${url} in a build without its backend must throw config_error naming ${option}"
               out "${exe}" --expect-config-error "${url}" "${option}")
  if(NOT out MATCHES "config_error: [^\n]*${option}")
    fail("opening ${url} did not report a config_error naming ${option}:\n${out}")
  endif()
endforeach()
elapsed(t)
message(STATUS "package test [2/3] passed (${t})")

# 3. sqlock as a subproject. include(CPack) ran there too, and wrote sqlock's package names
#    and components into the parent's CPackConfig.cmake: the parent's `cpack` made
#    libsqlock-dev and sqlock packages of the parent's files.
message(STATUS "package test [3/3]: add_subdirectory(sqlock) in a parent project")
set(parent "${WORK_DIR}/parent")
file(MAKE_DIRECTORY "${parent}")
file(WRITE "${parent}/CMakeLists.txt" "cmake_minimum_required(VERSION 3.22)
project(parent_of_sqlock LANGUAGES CXX)
set(SQLOCK_WITH_POSTGRES OFF CACHE BOOL \"\")
set(SQLOCK_WITH_MYSQL OFF CACHE BOOL \"\")
set(SQLOCK_BUILD_CLI OFF CACHE BOOL \"\")
add_subdirectory(\"${SOURCE_DIR}\" sqlock)
if(NOT TARGET sqlock::sqlock)
  message(FATAL_ERROR \"add_subdirectory(sqlock) gave no sqlock::sqlock target\")
endif()
foreach(option IN ITEMS SQLOCK_BUILD_TESTS SQLOCK_BUILD_EXAMPLES SQLOCK_BUILD_BENCH)
  if(\${option})
    message(FATAL_ERROR \"\${option} is ON in a subproject build\")
  endif()
endforeach()
")
run("configuring a parent project with add_subdirectory(sqlock)"
    "${CMAKE_COMMAND}" -S "${parent}" -B "${parent}/build" ${common_args})
foreach(f IN ITEMS CPackConfig.cmake sqlock/CPackConfig.cmake)
  if(EXISTS "${parent}/build/${f}")
    fail("add_subdirectory(sqlock) wrote ${f}: sqlock's CPack settings reached the parent project")
  endif()
endforeach()
elapsed(t)
message(STATUS "package test [3/3] passed (${t})")

message(STATUS "package test passed in ${t}")
