// config_test.cc: the configuration registry (typed parsing, errors naming the variable, the
// documented table) and launch-environment helpers.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "collectives/launch_env.h"
#include "support/thread_ranks.h"
#include "transport/config.h"
#include "transport/socket.h"

using namespace strata;

TEST(Config, DefaultsAndTypedValues) {
  strata::testing::ScopedEnv a("STRATA_TIMEOUT", "2.5");
  strata::testing::ScopedEnv b("STRATA_LOCAL_SLOT_BYTES", "64K");
  strata::testing::ScopedEnv c("STRATA_ALGO", "rhd");
  EXPECT_DOUBLE_EQ(config().timeoutSec, 2.5);
  EXPECT_EQ(config().localSlotBytes, 64u << 10);
  EXPECT_EQ(config().algo, "rhd");
}

TEST(Config, BadValuesNameTheVariableAndKeepThePreviousConfig) {
  const double before = config().timeoutSec;
  setenv("STRATA_TIMEOUT", "soon", 1);
  Status st = reloadConfig();
  unsetenv("STRATA_TIMEOUT");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("STRATA_TIMEOUT='soon'"), std::string::npos) << st.message();
  EXPECT_DOUBLE_EQ(config().timeoutSec, before);
  setenv("STRATA_ALGO", "fastest", 1);
  st = reloadConfig();
  unsetenv("STRATA_ALGO");
  EXPECT_NE(st.message().find("not one of auto|ring"), std::string::npos) << st.message();
  setenv("STRATA_LOCAL_SLOTS", "1000", 1);
  st = reloadConfig();
  unsetenv("STRATA_LOCAL_SLOTS");
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(reloadConfig().ok());
}

TEST(Config, EveryEntryIsDocumented) {
  auto entries = describeConfig();
  EXPECT_GE(entries.size(), 15u);
  for (const auto& e : entries) {
    EXPECT_TRUE(e.name.rfind("STRATA_", 0) == 0 || e.name == "NCCL_SOCKET_IFNAME") << e.name;
    EXPECT_FALSE(e.help.empty()) << e.name;
    EXPECT_FALSE(e.type.empty()) << e.name;
  }
}

TEST(Config, InterfaceListsFollowNcclSyntax) {
  EXPECT_TRUE(net::interfaceMatches("eth", "eth0"));
  EXPECT_TRUE(net::interfaceMatches("ib,eth", "eth1"));
  EXPECT_FALSE(net::interfaceMatches("ib,eth", "enp3s0"));
  EXPECT_FALSE(net::interfaceMatches("^lo,docker", "lo"));
  EXPECT_FALSE(net::interfaceMatches("^lo,docker", "docker0"));
  EXPECT_TRUE(net::interfaceMatches("^lo,docker", "rail0"));
  EXPECT_TRUE(net::interfaceMatches("=eth0", "eth0"));
  EXPECT_FALSE(net::interfaceMatches("=eth0", "eth01"));
  EXPECT_FALSE(net::interfaceMatches("^=eth0", "eth0"));
  EXPECT_TRUE(net::interfaceMatches("^=eth0", "eth01"));
}

TEST(Config, SocketIfnameSelectsInterfacesAndNcclNameIsHonoured) {
  ASSERT_EQ(setenv("NCCL_SOCKET_IFNAME", "=lo", 1), 0);
  ASSERT_TRUE(reloadConfig().ok());
  std::vector<net::Interface> ifs = net::usableInterfaces();
  ASSERT_EQ(ifs.size(), 1u);
  EXPECT_EQ(ifs[0].name, "lo");
  EXPECT_EQ(net::advertisedAddr(), htonl(INADDR_LOOPBACK));
  ASSERT_EQ(setenv("STRATA_SOCKET_IFNAME", "no-such-interface", 1), 0);  // strata's name wins
  ASSERT_TRUE(reloadConfig().ok());
  EXPECT_TRUE(net::usableInterfaces().empty());
  unsetenv("NCCL_SOCKET_IFNAME");
  unsetenv("STRATA_SOCKET_IFNAME");
  ASSERT_TRUE(reloadConfig().ok());
  const std::vector<net::Interface> dflt = net::usableInterfaces();
  if (dflt.size() > 1) {
    for (const net::Interface& f : dflt) EXPECT_NE(f.name, "lo") << "loopback only when nothing else is up";
  }
}

// strata-run --nodes leaves bridges named st<pid>r<k> with addresses in the launcher's namespace
// while its job runs: other jobs must not take them for rails (they vanish under their feet).
TEST(Config, VirtualClusterBridgesAreNotRails) {
  if (geteuid() != 0 || std::system("command -v ip > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "needs root and iproute2 to create a bridge";
  // Hold strata-run's virtual-cluster lock meanwhile: a launch refuses to start while another
  // holder's address in 198.18.0.0/15 exists.
  const int lock = open("/run/strata-vcluster.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) GTEST_SKIP() << "cannot take /run/strata-vcluster.lock";
  struct Unlock {
    int fd;
    ~Unlock() { close(fd); }
  } unlock{lock};
  const std::string br = "st" + std::to_string(getpid()) + "r7";
  if (std::system(("ip link add " + br + " type bridge 2>/dev/null && ip addr add 198.19.254.7/32 dev " + br +
                   " && ip link set " + br + " up").c_str()) != 0) {
    std::system(("ip link del " + br + " 2>/dev/null").c_str());
    GTEST_SKIP() << "cannot create a bridge here";
  }
  auto names = [] {
    std::string all;
    for (const net::Interface& f : net::usableInterfaces()) all += f.name + " ";
    return all;
  };
  ASSERT_TRUE(reloadConfig().ok());
  const std::string byDefault = names();
  ASSERT_EQ(setenv("STRATA_SOCKET_IFNAME", br.c_str(), 1), 0);  // named explicitly, it is used
  ASSERT_TRUE(reloadConfig().ok());
  const std::string named = names();
  unsetenv("STRATA_SOCKET_IFNAME");
  ASSERT_TRUE(reloadConfig().ok());
  std::system(("ip link del " + br).c_str());
  EXPECT_EQ(byDefault.find(br), std::string::npos) << byDefault;
  EXPECT_EQ(named, br + " ");
}

TEST(LaunchEnv, SlurmHostLists) {
  EXPECT_EQ(firstSlurmHost("node[01-04,07],gpu2"), "node01");
  EXPECT_EQ(firstSlurmHost("alpha,beta"), "alpha");
  EXPECT_EQ(firstSlurmHost("solo"), "solo");
  EXPECT_EQ(firstSlurmHost("rack1-n[7,9]"), "rack1-n7");
}

TEST(LaunchEnv, NoLauncherIsAClearError) {
  for (const char* v : {"STRATA_UNIQUE_ID", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) unsetenv(v);
  ASSERT_TRUE(reloadConfig().ok());
  LaunchInfo li;
  Status st = readLaunchEnv(&li);
  EXPECT_EQ(st.code(), strataInvalidArgument);
  EXPECT_NE(st.message().find("no launch environment"), std::string::npos) << st.message();
}
