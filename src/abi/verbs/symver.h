// Export helpers for the libibverbs.so.1 entry points.
//
// How a definition gets its symbol version (details: libibverbs.map and
// docs/abi.md):
//
//  * Plain definitions need nothing beyond C linkage and default visibility
//    (the library is built with -fvisibility=hidden):
//
//        extern "C" SOFTRDMA_EXPORT ibv_context* ibv_open_device(ibv_device* device) {...}
//
//    The version script gives the plain name its node, e.g.
//    ibv_open_device@@IBVERBS_1.1. This also holds for the 33 names that have
//    an additional IBVERBS_1.0 compat variant: do NOT add a .symver/symver
//    attribute to their plain definitions, and do not list them in the
//    IBVERBS_1.0 node of the map (that would version the plain definition as
//    1.0 and clash with the compat one).
//
//  * Definitions that must carry an explicit, non-default version (the 1.0
//    compat variants, ibv_register_driver@IBVERBS_1.1) use a differently named
//    function plus SOFTRDMA_SYMVER. Only compat_1_0.cpp and
//    driver_private.cpp need this.
//
// verbs.h turns ibv_get_device_list, ibv_query_port, ibv_reg_mr and
// ibv_reg_mr_iova into macros/inlines; a file defining one of those exported
// functions must #undef the macro first.
#pragma once

#define SOFTRDMA_EXPORT __attribute__((visibility("default")))

// Binds `impl`, a C-linkage function defined in the same translation unit,
// to the exact symbol `versioned_name` ("name@NODE", one '@': a non-default
// version that only binaries already linked against it can reach). Use at
// file scope, after the definition. `impl` itself must be exported
// (SOFTRDMA_EXPORT) or the alias would be hidden too; the version script's
// `local: *` then keeps the name `impl` out of the dynamic symbol table.
//
// A top-level .symver directive rather than GCC's symver attribute so that
// clang builds the same way; the price is that these files must not be
// compiled with -flto (tests/abi/check_exports.sh would catch the fallout).
#define SOFTRDMA_SYMVER(impl, versioned_name) __asm__(".symver " #impl ", " versioned_name)
