# Installs libtether, its public headers, the tools, a CMake package and tether.pc.
include(CMakePackageConfigHelpers)
get_property(_headers GLOBAL PROPERTY TETHER_PUBLIC_HEADERS)
install(FILES ${_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tether)
install(TARGETS tether EXPORT tetherTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS tether-info RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT tetherTargets NAMESPACE tether:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tether)
configure_package_config_file(cmake/tetherConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tetherConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tether)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tetherConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tetherConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/tetherConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tether)
configure_file(cmake/tether.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tether.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tether.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
