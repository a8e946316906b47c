# `cmake --install build --prefix P` (see README "Installing"):
#   P/lib/libibverbs.so.1(.14.44) and librdmacm.so.1(.3.44) with their
#   development links libibverbs.so and librdmacm.so;
#   P/include/{infiniband,rdma}/...: the rdma-core 44 headers softrdma was
#   built against (SOFTRDMA_INSTALL_HEADERS);
#   P/lib/pkgconfig/{libibverbs,librdmacm}.pc;
#   P/bin/softrdma.
# (lib is the GNUInstallDirs libdir: lib/<multiarch> when configured with
# CMAKE_INSTALL_PREFIX=/usr on Debian.)

# librdmacm.so.1 pairs with the libibverbs.so.1 installed next to it, as it
# does in the build tree.
set_target_properties(rdmacm PROPERTIES INSTALL_RPATH "$ORIGIN")
install(TARGETS ibverbs rdmacm LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS softrdma RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Headers. softrdma implements rdma-core 44's ABI and is compiled against
# Debian's rdma-core 44 headers (libibverbs-dev, librdmacm-dev): they define
# the structures, inline functions and symbol versions of the contract, so a
# client must see exactly those. softrdma does not keep its own copy (it
# could drift from the ABI it implements); the install copies the very files
# the build used, so that P is self-contained for a client compiled with
# `pkg-config --cflags libibverbs`. Vendor headers (mlx5dv.h, efadv.h, ...)
# are left out: softrdma has no vendor provider. OFF leaves the headers to
# the system's libibverbs-dev (e.g. when installing into /usr, where the
# same files already belong to that package).
option(SOFTRDMA_INSTALL_HEADERS "Install the rdma-core headers softrdma was built against" ON)
if(SOFTRDMA_INSTALL_HEADERS)
  set(SOFTRDMA_CLIENT_HEADERS
    infiniband/verbs.h infiniband/verbs_api.h infiniband/ib_user_ioctl_verbs.h
    infiniband/arch.h infiniband/opcode.h infiniband/sa.h infiniband/sa-kern-abi.h
    infiniband/tm_types.h infiniband/ib.h
    rdma/rdma_cma.h rdma/rdma_cma_abi.h rdma/rdma_verbs.h rdma/rsocket.h)
  foreach(header ${SOFTRDMA_CLIENT_HEADERS})
    if(NOT EXISTS ${IBVERBS_INCLUDE_DIR}/${header})
      message(FATAL_ERROR "${IBVERBS_INCLUDE_DIR}/${header} is missing: install libibverbs-dev and "
                          "librdmacm-dev (scripts/install-deps.sh) or configure with "
                          "-DSOFTRDMA_INSTALL_HEADERS=OFF")
    endif()
    get_filename_component(header_dir ${header} DIRECTORY)
    install(FILES ${IBVERBS_INCLUDE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${header_dir})
  endforeach()
endif()

# pkg-config files with absolute paths into the prefix given at install time
# (`--prefix` may differ from the configured CMAKE_INSTALL_PREFIX): filled
# here except for the prefix, which the install step writes in.
set(SOFTRDMA_PC_PREFIX "%%SOFTRDMA_INSTALL_PREFIX%%")
get_target_property(SOFTRDMA_VERBS_LIBRARY_VERSION ibverbs VERSION)
get_target_property(SOFTRDMA_RDMACM_LIBRARY_VERSION rdmacm VERSION)
foreach(pc libibverbs librdmacm)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc.template @ONLY)
  install(CODE "
    file(READ \"${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc.template\" pc_text)
    string(REPLACE \"%%SOFTRDMA_INSTALL_PREFIX%%\" \"\${CMAKE_INSTALL_PREFIX}\" pc_text \"\${pc_text}\")
    file(WRITE \"${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc\" \"\${pc_text}\")")
  install(FILES ${CMAKE_BINARY_DIR}/pkgconfig/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
