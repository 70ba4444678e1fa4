# Debian packages, made by `cpack -G DEB` in a configured and built tree (see README, "Packages"):
#
#   libsqlock-dev  the static library, headers, CMake package, sqlock.pc and migrations/ (component dev)
#   sqlock         the command line, its man page and bash completion (component cli)
#
# sqlock is a static library (add_library(sqlock) without SHARED, and BUILD_SHARED_LIBS unset), so
# there is no runtime library package: what links it carries it. libsqlock-dev therefore depends
# on the -dev packages of what a consumer must link besides it (the backends' drivers, spdlog),
# at the versions this build compiled against; the sqlock program depends on the drivers' shared
# libraries, which dpkg-shlibdeps reads from the binary.

get_target_property(sqlock_library_type sqlock TYPE)
if(NOT sqlock_library_type STREQUAL "STATIC_LIBRARY")
  # A shared libsqlock would need a runtime package with a versioned soname, which the project
  # does not define; rather than make packages that are wrong, make none.
  message(STATUS "Debian packages are made for the static library only; BUILD_SHARED_LIBS gives none")
  return()
endif()

set(SQLOCK_PACKAGE_MAINTAINER "sqlock maintainers <maintainers@sqlock.invalid>"
    CACHE STRING "Maintainer field of the Debian packages (a distributor sets its own)")

# deb_dependency(<out> <package> <abi-parts>): "<package> (>= V)" with V the upstream version dpkg
# has installed, and, when the library's ABI changes with its first <abi-parts> version numbers
# (libpqxx-6.4.so, libspdlog.so.1.10), "<package> (<< next~)" too: libsqlock.a was compiled
# against those headers and must be linked with the same ABI. Just "<package>" without dpkg.
function(deb_dependency out package abi_parts)
  set(dep "${package}")
  if(SQLOCK_DPKG_QUERY)
    execute_process(COMMAND ${SQLOCK_DPKG_QUERY} -W "-f=\${Version}" ${package}
                    OUTPUT_VARIABLE version RESULT_VARIABLE rc ERROR_QUIET)
    # [epoch:]major.minor[.patch] from e.g. 1:1.10.0+ds-0.4 or 6.4.5-2
    if(rc EQUAL 0 AND version MATCHES "^([0-9]+:)?([0-9]+)\\.([0-9]+)(\\.[0-9]+)?")
      set(epoch "${CMAKE_MATCH_1}")
      set(dep "${package} (>= ${epoch}${CMAKE_MATCH_2}.${CMAKE_MATCH_3}${CMAKE_MATCH_4})")
      if(abi_parts EQUAL 1)
        math(EXPR next "${CMAKE_MATCH_2} + 1")
        string(APPEND dep ", ${package} (<< ${epoch}${next}~)")
      elseif(abi_parts EQUAL 2)
        math(EXPR next "${CMAKE_MATCH_3} + 1")
        string(APPEND dep ", ${package} (<< ${epoch}${CMAKE_MATCH_2}.${next}~)")
      endif()
    endif()
  endif()
  set(${out} "${dep}" PARENT_SCOPE)
endfunction()

find_program(SQLOCK_DPKG_QUERY dpkg-query)
mark_as_advanced(SQLOCK_DPKG_QUERY)
deb_dependency(dev_depends libspdlog-dev 2)
if(SQLOCK_WITH_POSTGRES)
  deb_dependency(dep libpqxx-dev 2)
  # libpq-dev comes with libpqxx-dev; sqlockConfig.cmake finds both through pkg-config.
  string(APPEND dev_depends ", ${dep}, pkgconf | pkg-config")
endif()
if(SQLOCK_WITH_MYSQL)
  deb_dependency(dep libmysqlcppconn-dev 2)
  string(APPEND dev_depends ", ${dep}")
endif()
if(SQLOCK_WITH_SQLITE)
  deb_dependency(dep libsqlite3-dev 0)
  string(APPEND dev_depends ", ${dep}")
endif()

set(CPACK_PACKAGE_NAME sqlock)
set(CPACK_PACKAGE_VENDOR sqlock)
set(CPACK_PACKAGE_CONTACT "${SQLOCK_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_GENERATOR DEB)
# Packages install into /usr, whatever prefix the build was configured with, and install scripts
# (sqlock.pc's) must see that prefix, not cpack's staging directory: stage through DESTDIR.
# (With CMAKE_INSTALL_PREFIX=/usr at configure time, GNUInstallDirs also picks Debian's
# multiarch libdir, /usr/lib/<triplet>; otherwise the library goes to /usr/lib.)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the program; CMake never strips static libraries
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL dev)
if(SQLOCK_BUILD_CLI)
  list(APPEND CPACK_COMPONENTS_ALL cli)
endif()

set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libsqlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${dev_depends}")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS sqlock)
set(CPACK_DEBIAN_DEV_DESCRIPTION "distributed locks stored in SQL tables (C++20 library)
sqlock keeps locks, leases and fencing tokens in tables of the SQL database
you already run: PostgreSQL, MySQL/MariaDB, or SQLite. RAII leases renewed by
a watchdog, std::unique_lock-compatible mutexes, fair queues and a run-once
job runner.
.
This package has the static library, its headers, the CMake package
(find_package(sqlock)), the pkg-config file sqlock.pc and the schema
migrations as plain SQL in /usr/share/sqlock/migrations.")

set(CPACK_DEBIAN_CLI_PACKAGE_NAME sqlock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_CLI_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_CLI_DESCRIPTION "run commands under distributed locks stored in SQL tables
sqlock wraps any program the way flock(1) does, for a whole fleet: the lock,
a lease renewed while the program runs, lives in a table of PostgreSQL,
MySQL/MariaDB or SQLite. It can also run a job once per period or run key
across machines, and shows and repairs lock state (status, runs,
release --force).")

include(CPack)
