# sqlock.pc, from cmake/sqlock.pc.in. Included by ../CMakeLists.txt once the sqlock target and its
# backends are set up.
#
# What a consumer links besides libsqlock: the drivers of the backends this build has, spdlog
# (and through it fmt) and threads. A static libsqlock.a carries none of them, so they are public
# (Requires, Libs) and a plain `pkg-config --cflags --libs sqlock` links; a shared libsqlock
# carries them itself, so they are private (needed for `--static` only).
#
# The file is written at install time, not configure time: the prefix it names must be the one
# the files went to (`cmake --install --prefix DIR`, or /usr inside a Debian package), which a
# build directory does not know beforehand.

set(pc_requires spdlog)
set(pc_libs -pthread)
if(SQLOCK_WITH_POSTGRES)
  list(APPEND pc_requires libpqxx libpq)
endif()
if(SQLOCK_WITH_SQLITE)
  list(APPEND pc_requires sqlite3)
endif()
if(SQLOCK_WITH_MYSQL)
  # Connector/C++ 1.1 has no .pc file: name the library, and its directory unless the
  # linker searches it anyway.
  get_filename_component(pc_mysql_dir "${MYSQLCPPCONN_LIBRARY}" DIRECTORY)
  if(NOT pc_mysql_dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    list(APPEND pc_libs "-L${pc_mysql_dir}")
  endif()
  list(APPEND pc_libs -lmysqlcppconn)
endif()
list(JOIN pc_requires " " pc_requires)
list(JOIN pc_libs " " pc_libs)

get_target_property(pc_type sqlock TYPE)
if(pc_type STREQUAL "STATIC_LIBRARY")
  set(SQLOCK_PC_REQUIRES "${pc_requires}")
  set(SQLOCK_PC_LIBS "${pc_libs}")
  set(SQLOCK_PC_REQUIRES_PRIVATE "")
  set(SQLOCK_PC_LIBS_PRIVATE "")
else()
  set(SQLOCK_PC_REQUIRES "")
  set(SQLOCK_PC_LIBS "")
  set(SQLOCK_PC_REQUIRES_PRIVATE "${pc_requires}")
  set(SQLOCK_PC_LIBS_PRIVATE "${pc_libs}")
endif()

# At install time: the configure-time values first (the second block is a bracket argument, so
# nothing in it is expanded now), then the template is configured straight into the destination,
# $DESTDIR included (cpack installs through it: CPACK_SET_DESTDIR in packaging.cmake).
install(CODE "
  set(PROJECT_VERSION [[${PROJECT_VERSION}]])
  set(SQLOCK_PC_REQUIRES [[${SQLOCK_PC_REQUIRES}]])
  set(SQLOCK_PC_LIBS [[${SQLOCK_PC_LIBS}]])
  set(SQLOCK_PC_REQUIRES_PRIVATE [[${SQLOCK_PC_REQUIRES_PRIVATE}]])
  set(SQLOCK_PC_LIBS_PRIVATE [[${SQLOCK_PC_LIBS_PRIVATE}]])
  set(sqlock_pc_template [[${PROJECT_SOURCE_DIR}/cmake/sqlock.pc.in]])
  set(sqlock_pc_libdir [[${CMAKE_INSTALL_LIBDIR}]])
  set(sqlock_pc_includedir [[${CMAKE_INSTALL_INCLUDEDIR}]])
" COMPONENT dev)
install(CODE [[
  set(SQLOCK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  # Relative directories are written relative to ${prefix}, as pkg-config files usually are.
  foreach(dir IN ITEMS libdir includedir)
    if(IS_ABSOLUTE "${sqlock_pc_${dir}}")
      set(sqlock_pc_full_${dir} "${sqlock_pc_${dir}}")
      set(SQLOCK_PC_${dir} "${sqlock_pc_${dir}}")
    else()
      set(sqlock_pc_full_${dir} "${CMAKE_INSTALL_PREFIX}/${sqlock_pc_${dir}}")
      set(SQLOCK_PC_${dir} "\${prefix}/${sqlock_pc_${dir}}")
    endif()
  endforeach()
  set(SQLOCK_PC_LIBDIR "${SQLOCK_PC_libdir}")
  set(SQLOCK_PC_INCLUDEDIR "${SQLOCK_PC_includedir}")
  set(sqlock_pc "$ENV{DESTDIR}${sqlock_pc_full_libdir}/pkgconfig/sqlock.pc")
  message(STATUS "Installing: ${sqlock_pc}")
  configure_file("${sqlock_pc_template}" "${sqlock_pc}" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${sqlock_pc}")
]] COMPONENT dev)
