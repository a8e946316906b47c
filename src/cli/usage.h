// The --help texts of the softrdma command and its subcommands. The full
// reference is docs/softrdma-command.md; these say enough to use each one.
#pragma once

namespace softrdma::cli {

inline constexpr const char kMainUsage[] =
    "Usage: softrdma [--version | --help] SUBCOMMAND [ARGS...]\n"
    "\n"
    "softrdma is RDMA in software: a libibverbs.so.1 and librdmacm.so.1 exposing the device\n"
    "softrdma0. This command runs programs on it and checks the system it needs.\n"
    "\n"
    "Subcommands:\n"
    "  run [--] CMD [ARGS...]  run CMD and its children on softrdma, with the device files\n"
    "                          RDMA middleware probes (/dev/infiniband, /sys/class/infiniband)\n"
    "  doctor                  check shared memory, cross-memory attach and namespaces\n"
    "  help [SUBCOMMAND]       this text, or a subcommand's\n"
    "\n"
    "Options:\n"
    "  --version  print softrdma's version and the rdma-core ABI it implements\n"
    "  --help     print this text\n"
    "\n"
    "Exit status: 0 on success, 2 on a usage error; `run` and `doctor` document their own\n"
    "(softrdma SUBCOMMAND --help).\n";

inline constexpr const char kRunUsage[] =
    "Usage: softrdma run [--] CMD [ARGS...]\n"
    "\n"
    "Runs CMD, and everything it starts, on softrdma:\n"
    "  - LD_LIBRARY_PATH starts with the directory of softrdma's libibverbs.so.1 and\n"
    "    librdmacm.so.1 (the libraries next to this command);\n"
    "  - /dev/infiniband/<uverbs node> and /dev/infiniband/rdma_cm exist as character devices\n"
    "    (/dev/null bound onto them);\n"
    "  - /sys/class/infiniband/<device>/ (node_guid, ports/<p>/state, gids, gid_attrs, ...)\n"
    "    and /sys/class/infiniband_verbs/ hold the values the library reports (ibv_devinfo).\n"
    "These are visible to CMD and its children only, through a private mount namespace (as a\n"
    "non-root user, inside a user namespace that maps your uid and gid to themselves). Nothing\n"
    "changes for other processes; /dev/shm is shared with them, so programs inside and outside\n"
    "talk to each other.\n"
    "\n"
    "Exit status:\n"
    "  CMD's exit status, or 128+N when CMD is killed by signal N (CMD replaces softrdma);\n"
    "  124  the system refuses user or mount namespaces (the message says what to enable);\n"
    "  125  softrdma run itself failed (usage error, no device, a mount refused);\n"
    "  126  CMD was found but could not be executed;\n"
    "  127  CMD was not found.\n";

inline constexpr const char kDoctorUsage[] =
    "Usage: softrdma doctor\n"
    "\n"
    "Checks what softrdma depends on and says, for each, what works and what to change:\n"
    "  library            softrdma's libibverbs.so.1 loads and lists its device\n"
    "  shared memory      /dev/shm exists, is writable, its size and free space\n"
    "  cross-memory attach  process_vm_readv between processes of one user (Yama\n"
    "                     ptrace_scope, CAP_SYS_PTRACE, seccomp)\n"
    "  softrdma run       user and mount namespaces, tmpfs, overlay and bind mounts\n"
    "\n"
    "Exit status:\n"
    "  0  every check passed;\n"
    "  1  softrdma works, with limitations (warnings);\n"
    "  2  usage error;\n"
    "  3  something softrdma needs is missing (failures).\n";

}  // namespace softrdma::cli
