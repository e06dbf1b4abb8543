// ${POD_IP} and ${POD_IPS} in ip-sans and dns-names, end to end: the real certmountd with
// the cert-manager issuer against the fake API server. kubelet publishes
// before the pod has an address, so the first certificate lacks it; once the
// fake gives the pod its addresses, the driver's node-scoped pod watch has
// the certificate issued again into the same mount, and (with the readiness
// gate attribute) sets the pod's condition. Checked with OpenSSL.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "renew/pod_ip_reissuer.h"
#include "support/daemon.h"
#include "support/fake_kube_api.h"
#include "support/root.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"

namespace certmount::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kPodUid = kKubeletPodUid;

std::map<std::string, std::string> PodIpAttributes(const std::string& ip_sans) {
  return {{"csi.cert-manager.io/key-algorithm", "ECDSA"},
          {"csi.cert-manager.io/issuer-name", "team-ca"},
          {"csi.cert-manager.io/issuer-kind", "ClusterIssuer"},
          {"csi.cert-manager.io/dns-names", "web.default.svc"},
          {"csi.cert-manager.io/ip-sans", ip_sans},
          {"csi.cert-manager.io/key-usages", "digital signature,key encipherment,server auth"}};
}

bool HasIp(const InspectedCertificate& cert, const std::string& ip) {
  return std::find(cert.ip_addresses.begin(), cert.ip_addresses.end(), ip) !=
         cert.ip_addresses.end();
}

// The pod's condition `type`, or null.
json PodCondition(const std::optional<json>& pod, std::string_view type) {
  if (!pod) return nullptr;
  for (const json& condition : (*pod)["status"].value("conditions", json::array())) {
    if (condition.value("type", "") == type) return condition;
  }
  return nullptr;
}

class PodIpSansTest : public ::testing::Test {
 protected:
  PodIpSansTest() { api_.PutPod("default", "web-0", kPodUid); }
  void SetUp() override { CERTMOUNT_REQUIRE_ROOT(); }

  void StartDaemon() {
    const std::string kubeconfig =
        WriteKubeconfig(dir_.Sub("kubeconfig"), api_.url(), api_.server_ca_pem());
    daemon_ = std::make_unique<Daemon>(dir_.Sub("node"));
    ASSERT_TRUE(daemon_->Start({"--issuer=cert-manager", "--kubeconfig=" + kubeconfig}))
        << daemon_->log();
  }

  std::string Target(const std::string& pod) { return daemon_->PodTarget(pod); }

  // Publishes for pod `pod_name` (uid `uid`) in namespace default.
  grpc::Status Publish(const std::string& volume_id, const std::string& target,
                       std::map<std::string, std::string> attributes,
                       const std::string& pod_name = "web-0", const std::string& uid = kPodUid) {
    attributes["csi.storage.k8s.io/pod.name"] = pod_name;
    attributes["csi.storage.k8s.io/pod.uid"] = uid;
    csi::v1::NodePublishVolumeResponse response;
    return daemon_->node().NodePublishVolume(
        CallContext().get(), KubeletPublishRequest(volume_id, target, attributes), &response);
  }

  // Waits (bounded) until the certificate in `target` carries `ip`.
  bool WaitForIp(const std::string& target, const std::string& ip) {
    return api_.WaitUntil([&] { return HasIp(InspectCertificateFile(target + "/tls.crt"), ip); },
                          20s);
  }

  int Posts() { return api_.Count("POST", "/apis/cert-manager.io/"); }

  // Restarts certmountd, publishes a volume with `attributes` for a new pod
  // web-1 and gives web-1 the address 10.244.1.8; returns once
  // `arrived(web-1's target)`. The restarted driver lists the pods again
  // and checks the volumes it already has; work is handled in order, so once
  // web-1's certificate is re-issued, the earlier volumes' turn has passed.
  void RestartThenIssueForAnotherPod(const std::map<std::string, std::string>& attributes,
                                     const std::function<bool(const std::string&)>& arrived) {
    ASSERT_EQ(daemon_->Terminate(), 0) << daemon_->log();
    const int lists = api_.Count("GET", "/api/v1/pods");
    ASSERT_TRUE(daemon_->Start({"--issuer=cert-manager", "--kubeconfig=" + dir_.Sub("kubeconfig")}))
        << daemon_->log();
    api_.PutPod("default", "web-1", "uid-web-1");
    const std::string target = Target("pod-b");
    ASSERT_TRUE(Publish("csi-ip-b", target, attributes, "web-1", "uid-web-1").ok())
        << daemon_->log();
    ASSERT_TRUE(api_.WaitUntil([&] { return api_.Count("GET", "/api/v1/pods") > lists; }));
    api_.SetPodIps("default", "web-1", {"10.244.1.8"});
    ASSERT_TRUE(api_.WaitUntil([&] { return arrived(target); }, 20s)) << daemon_->log();
  }

  TempDir dir_;
  FakeKubeApi api_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(PodIpSansTest, FirstCertificateLacksThePodIpAndTheNextOneInTheSameMountHasIt) {
  StartDaemon();
  const std::string target = Target("pod-a");
  ASSERT_TRUE(Publish("csi-ip-a", target, PodIpAttributes("${POD_IP}")).ok()) << daemon_->log();
  InspectedCertificate first = InspectCertificateFile(target + "/tls.crt");
  ASSERT_TRUE(first.parsed);
  EXPECT_TRUE(first.ip_addresses.empty());
  EXPECT_EQ(first.dns_names, std::vector<std::string>{"web.default.svc"});
  // The watch is scoped to this node's pods.
  ASSERT_TRUE(api_.WaitUntil([&] { return api_.Count("GET", "/api/v1/pods", true) > 0; }))
      << daemon_->log();
  for (const RecordedRequest& request : api_.Requests()) {
    if (request.path != "/api/v1/pods") continue;
    EXPECT_EQ(request.params.at("fieldSelector"), "spec.nodeName=test-node");
  }

  api_.SetPodIps("default", "web-0", {"10.244.1.7", "fd00::7"});
  ASSERT_TRUE(WaitForIp(target, "10.244.1.7")) << daemon_->log();
  InspectedCertificate second = InspectCertificateFile(target + "/tls.crt");
  EXPECT_EQ(second.ip_addresses, std::vector<std::string>{"10.244.1.7"});  // POD_IP: the first
  EXPECT_EQ(second.dns_names, std::vector<std::string>{"web.default.svc"});
  EXPECT_NE(second.serial_hex, first.serial_hex);
  EXPECT_EQ(VerifyChain(target + "/tls.crt", target + "/ca.crt"), "");
  EXPECT_TRUE(KeyMatchesCertificate(target + "/tls.key", target + "/tls.crt"));
  EXPECT_EQ(Posts(), 2);
  // Without the gate attribute the pod's status is left alone.
  EXPECT_EQ(api_.Count("PATCH", "/api/v1/"), 0);
}

TEST_F(PodIpSansTest, PodIpsAddsEveryAddressOfADualStackPod) {
  StartDaemon();
  const std::string target = Target("pod-b");
  ASSERT_TRUE(Publish("csi-ip-b", target, PodIpAttributes("192.0.2.1,${POD_IPS}")).ok())
      << daemon_->log();
  EXPECT_EQ(InspectCertificateFile(target + "/tls.crt").ip_addresses,
            std::vector<std::string>{"192.0.2.1"});
  api_.SetPodIps("default", "web-0", {"10.244.1.7", "fd00::7"});
  // OpenSSL prints IPv6 uncompressed.
  ASSERT_TRUE(WaitForIp(target, "FD00:0:0:0:0:0:0:7")) << daemon_->log();
  EXPECT_EQ(InspectCertificateFile(target + "/tls.crt").ip_addresses,
            (std::vector<std::string>{"192.0.2.1", "10.244.1.7", "FD00:0:0:0:0:0:0:7"}));
  EXPECT_EQ(VerifyChain(target + "/tls.crt", target + "/ca.crt"), "");
}

TEST_F(PodIpSansTest, ReadinessGateConditionIsSetOnceTheCertificateHasTheIp) {
  StartDaemon();
  const std::string target = Target("pod-c");
  auto attributes = PodIpAttributes("${POD_IP}");
  attributes["csi.cert-manager.io/pod-ip-readiness-gate"] = "true";
  ASSERT_TRUE(Publish("csi-ip-c", target, attributes).ok()) << daemon_->log();
  ASSERT_TRUE(api_.WaitUntil([&] { return api_.Count("GET", "/api/v1/pods", true) > 0; }));
  EXPECT_TRUE(PodCondition(api_.Pod("default", "web-0"), kPodIpReadinessCondition).is_null());

  api_.SetPodIps("default", "web-0", {"10.244.1.9"});
  ASSERT_TRUE(api_.WaitUntil(
      [&] {
        return !PodCondition(api_.Pod("default", "web-0"), kPodIpReadinessCondition).is_null();
      },
      20s))
      << daemon_->log();
  json condition = PodCondition(api_.Pod("default", "web-0"), kPodIpReadinessCondition);
  EXPECT_EQ(condition["status"], "True");
  // The condition comes after the certificate, never before.
  EXPECT_TRUE(HasIp(InspectCertificateFile(target + "/tls.crt"), "10.244.1.9"));
  EXPECT_EQ(VerifyChain(target + "/tls.crt", target + "/ca.crt"), "");
  // A strategic merge patch of the status with the pod's UID as precondition.
  for (const RecordedRequest& request : api_.Requests()) {
    if (request.method != "PATCH") continue;
    EXPECT_EQ(request.path, "/api/v1/namespaces/default/pods/web-0/status");
    EXPECT_EQ(json::parse(request.body)["metadata"]["uid"], kPodUid);
  }
}

TEST_F(PodIpSansTest, PodsOnOtherNodesAndPodsWithAnotherUidAreIgnored) {
  api_.PutPod("default", "web-1", "uid-web-1");
  api_.PutPod("default", "elsewhere", "uid-elsewhere", "other-node");
  StartDaemon();
  const std::string target_a = Target("pod-a");
  const std::string target_b = Target("pod-b");
  // Volume a was published for web-0 with kPodUid; the API now has another
  // web-0 (a new pod of the same name). Volume b belongs to web-1.
  ASSERT_TRUE(Publish("csi-ip-a", target_a, PodIpAttributes("${POD_IP}")).ok()) << daemon_->log();
  ASSERT_TRUE(
      Publish("csi-ip-b", target_b, PodIpAttributes("${POD_IP}"), "web-1", "uid-web-1").ok())
      << daemon_->log();
  ASSERT_TRUE(api_.WaitUntil([&] { return api_.Count("GET", "/api/v1/pods", true) > 0; }));
  api_.PutPod("default", "web-0", "uid-new-web-0");
  api_.SetPodIps("default", "web-0", {"10.244.1.20"});
  api_.SetPodIps("default", "elsewhere", {"10.244.9.9"});
  // Events arrive in order: once web-1's address is in place, the earlier
  // events have been handled.
  api_.SetPodIps("default", "web-1", {"10.244.1.21"});
  ASSERT_TRUE(WaitForIp(target_b, "10.244.1.21")) << daemon_->log();
  EXPECT_TRUE(InspectCertificateFile(target_a + "/tls.crt").ip_addresses.empty());
  EXPECT_EQ(InspectCertificateFile(target_b + "/tls.crt").ip_addresses,
            std::vector<std::string>{"10.244.1.21"});
  EXPECT_EQ(Posts(), 3);  // two publishes, one re-issue
}

TEST_F(PodIpSansTest, ARestartIssuesAgainOnlyCertificatesThatLackTheirPodsAddresses) {
  StartDaemon();
  const std::string target = Target("pod-a");
  ASSERT_TRUE(Publish("csi-ip-a", target, PodIpAttributes("${POD_IP}")).ok()) << daemon_->log();
  api_.SetPodIps("default", "web-0", {"10.244.1.7"});
  ASSERT_TRUE(WaitForIp(target, "10.244.1.7")) << daemon_->log();
  RestartThenIssueForAnotherPod(PodIpAttributes("${POD_IP}"), [&](const std::string& target_b) {
    return HasIp(InspectCertificateFile(target_b + "/tls.crt"), "10.244.1.8");
  });
  EXPECT_EQ(Posts(), 4);  // web-0: publish and re-issue; web-1: the same; none after the restart
}

bool HasDnsName(const std::string& target, const std::string& name) {
  const std::vector<std::string> names = InspectCertificateFile(target + "/tls.crt").dns_names;
  return std::find(names.begin(), names.end(), name) != names.end();
}

// dns-names "${POD_IP}.<ns>.pod.cluster.local": the pod's own DNS record.
std::map<std::string, std::string> PodDnsAttributes() {
  std::map<std::string, std::string> attributes = PodIpAttributes("192.0.2.1");
  attributes["csi.cert-manager.io/dns-names"] =
      "web.default.svc,${POD_IP}.${POD_NAMESPACE}.pod.cluster.local";
  return attributes;
}

TEST_F(PodIpSansTest, DnsNameBuiltFromThePodIpArrivesWithTheAddressAndSurvivesARestart) {
  StartDaemon();
  const std::string target = Target("pod-a");
  ASSERT_TRUE(Publish("csi-ip-a", target, PodDnsAttributes()).ok()) << daemon_->log();
  EXPECT_EQ(InspectCertificateFile(target + "/tls.crt").dns_names,
            std::vector<std::string>{"web.default.svc"});
  api_.SetPodIps("default", "web-0", {"10.244.1.7", "fd00::7"});
  ASSERT_TRUE(api_.WaitUntil(
      [&] { return HasDnsName(target, "10-244-1-7.default.pod.cluster.local"); }, 20s))
      << daemon_->log();
  InspectedCertificate cert = InspectCertificateFile(target + "/tls.crt");
  EXPECT_EQ(cert.dns_names,
            (std::vector<std::string>{"web.default.svc", "10-244-1-7.default.pod.cluster.local"}));
  EXPECT_EQ(cert.ip_addresses, std::vector<std::string>{"192.0.2.1"});
  EXPECT_EQ(VerifyChain(target + "/tls.crt", target + "/ca.crt"), "");

  // After a restart the certificate counts as complete: only web-1's new
  // volume is issued (twice), as in the ip-sans restart test above.
  RestartThenIssueForAnotherPod(PodDnsAttributes(), [&](const std::string& target_b) {
    return HasDnsName(target_b, "10-244-1-8.default.pod.cluster.local");
  });
  EXPECT_EQ(Posts(), 4);
}

TEST(PodIpSansLocalCaTest, WithoutClusterAccessPodIpIsRefusedClearly) {
  CERTMOUNT_REQUIRE_ROOT();
  TempDir dir;
  Daemon daemon(dir.Sub("node"));
  ASSERT_TRUE(daemon.Start()) << daemon.log();
  const std::string target = daemon.PodTarget("pod-a");
  csi::v1::NodePublishVolumeResponse response;
  grpc::Status status = daemon.node().NodePublishVolume(
      CallContext().get(),
      KubeletPublishRequest("csi-ip-local", target, PodIpAttributes("${POD_IP}")), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("no cluster access"), std::string::npos)
      << status.error_message();
  EXPECT_FALSE(fs::exists(target + "/tls.crt"));

  // In dns-names the message names dns-names.
  status = daemon.node().NodePublishVolume(
      CallContext().get(), KubeletPublishRequest("csi-ip-local", target, PodDnsAttributes()),
      &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message().rfind("csi.cert-manager.io/dns-names: ", 0), 0u)
      << status.error_message();
  EXPECT_FALSE(fs::exists(target + "/tls.crt"));
}

}  // namespace
}  // namespace certmount::testing
