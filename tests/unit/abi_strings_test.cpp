// Enum-to-text helpers behind ibv_wc_status_str, ibv_event_type_str,
// ibv_node_type_str and ibv_port_state_str.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "util/verbs_strings.h"

namespace softrdma {
namespace {

TEST(VerbsStrings, WcStatusNamesEveryStatus) {
  EXPECT_STREQ(wc_status_str(IBV_WC_SUCCESS), "success");
  EXPECT_STREQ(wc_status_str(IBV_WC_LOC_LEN_ERR), "local length error");
  EXPECT_STREQ(wc_status_str(IBV_WC_WR_FLUSH_ERR), "work request flushed error");
  EXPECT_STREQ(wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error");
  EXPECT_STREQ(wc_status_str(IBV_WC_RETRY_EXC_ERR), "transport retry counter exceeded");
  EXPECT_STREQ(wc_status_str(IBV_WC_RNR_RETRY_EXC_ERR), "RNR retry counter exceeded");
  EXPECT_STREQ(wc_status_str(IBV_WC_GENERAL_ERR), "general error");
  EXPECT_STREQ(wc_status_str(IBV_WC_TM_RNDV_INCOMPLETE), "tag matching rendezvous incomplete");

  // Each status has its own text: a log line must tell them apart.
  std::set<std::string> seen;
  for (int s = IBV_WC_SUCCESS; s <= IBV_WC_TM_RNDV_INCOMPLETE; ++s) {
    const char* text = wc_status_str(static_cast<ibv_wc_status>(s));
    ASSERT_NE(text, nullptr);
    EXPECT_STRNE(text, kUnknownEnumStr) << "status " << s;
    EXPECT_TRUE(seen.insert(text).second) << "duplicate text for status " << s << ": " << text;
  }
  EXPECT_EQ(seen.size(), 24u);
}

TEST(VerbsStrings, WcStatusOutOfRangeGivesFallback) {
  EXPECT_STREQ(wc_status_str(static_cast<ibv_wc_status>(IBV_WC_TM_RNDV_INCOMPLETE + 1)), "unknown");
  EXPECT_STREQ(wc_status_str(static_cast<ibv_wc_status>(-1)), "unknown");
  EXPECT_STREQ(wc_status_str(static_cast<ibv_wc_status>(0x7fffffff)), "unknown");
}

TEST(VerbsStrings, EventTypeNamesEveryEvent) {
  EXPECT_STREQ(event_type_str(IBV_EVENT_CQ_ERR), "CQ error");
  EXPECT_STREQ(event_type_str(IBV_EVENT_QP_FATAL), "QP fatal error");
  EXPECT_STREQ(event_type_str(IBV_EVENT_COMM_EST), "communication established");
  EXPECT_STREQ(event_type_str(IBV_EVENT_PORT_ACTIVE), "port active");
  EXPECT_STREQ(event_type_str(IBV_EVENT_PORT_ERR), "port error");
  EXPECT_STREQ(event_type_str(IBV_EVENT_SRQ_LIMIT_REACHED), "SRQ limit reached");
  EXPECT_STREQ(event_type_str(IBV_EVENT_GID_CHANGE), "GID table changed");
  EXPECT_STREQ(event_type_str(IBV_EVENT_WQ_FATAL), "WQ fatal error");

  std::set<std::string> seen;
  for (int e = IBV_EVENT_CQ_ERR; e <= IBV_EVENT_WQ_FATAL; ++e) {
    const char* text = event_type_str(static_cast<ibv_event_type>(e));
    EXPECT_STRNE(text, kUnknownEnumStr) << "event " << e;
    EXPECT_TRUE(seen.insert(text).second) << "duplicate text for event " << e;
  }
  EXPECT_EQ(seen.size(), 20u);
  EXPECT_STREQ(event_type_str(static_cast<ibv_event_type>(IBV_EVENT_WQ_FATAL + 1)), "unknown");
  EXPECT_STREQ(event_type_str(static_cast<ibv_event_type>(-7)), "unknown");
}

TEST(VerbsStrings, NodeTypeNames) {
  EXPECT_STREQ(node_type_str(IBV_NODE_CA), "InfiniBand channel adapter");
  EXPECT_STREQ(node_type_str(IBV_NODE_SWITCH), "InfiniBand switch");
  EXPECT_STREQ(node_type_str(IBV_NODE_ROUTER), "InfiniBand router");
  EXPECT_STREQ(node_type_str(IBV_NODE_RNIC), "iWARP RNIC");
  EXPECT_STREQ(node_type_str(IBV_NODE_USNIC), "usNIC");
  EXPECT_STREQ(node_type_str(IBV_NODE_USNIC_UDP), "usNIC UDP");
  EXPECT_STREQ(node_type_str(IBV_NODE_UNSPECIFIED), "unspecified");
  // IBV_NODE_UNKNOWN is a real enumerator (-1) and reads the same as garbage.
  EXPECT_STREQ(node_type_str(IBV_NODE_UNKNOWN), "unknown");
  EXPECT_STREQ(node_type_str(static_cast<ibv_node_type>(0)), "unknown");
  EXPECT_STREQ(node_type_str(static_cast<ibv_node_type>(IBV_NODE_UNSPECIFIED + 1)), "unknown");
}

TEST(VerbsStrings, PortStateNames) {
  EXPECT_STREQ(port_state_str(IBV_PORT_NOP), "no state change");
  EXPECT_STREQ(port_state_str(IBV_PORT_DOWN), "down");
  EXPECT_STREQ(port_state_str(IBV_PORT_INIT), "init");
  EXPECT_STREQ(port_state_str(IBV_PORT_ARMED), "armed");
  EXPECT_STREQ(port_state_str(IBV_PORT_ACTIVE), "active");
  EXPECT_STREQ(port_state_str(IBV_PORT_ACTIVE_DEFER), "active (deferred)");
  EXPECT_STREQ(port_state_str(static_cast<ibv_port_state>(6)), "unknown");
  EXPECT_STREQ(port_state_str(static_cast<ibv_port_state>(-1)), "unknown");
}

}  // namespace
}  // namespace softrdma
