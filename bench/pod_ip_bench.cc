// pod_ip_bench: how long a pod serves a certificate without its own IP.
//
// The real certmountd (cert-manager issuer) runs against the fake API server
// of the tests, which signs with a real CA (ECDSA P-256 leaves). Each run
// puts a new pod on the node, publishes its volume with
// `ip-sans: ${POD_IP}` (the certificate goes out without the address), then
// gives the pod its address in the fake and times how long it takes until
// the volume's tls.crt (read through the pod's mount) carries it: the watch
// event, the re-issue through the renewal scheduler (key, CSR, a
// CertificateRequest created, signed and read back) and the atomic swap.
// The file is polled every millisecond, so figures are at most 1 ms late.
// Needs root (mounts).
//
//   sudo build/pod_ip_bench --runs 20 [--kube-api-qps 50]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "support/daemon.h"
#include "support/fake_kube_api.h"
#include "support/temp_dir.h"
#include "support/x509_inspect.h"

namespace {

using namespace certmount::testing;
using Clock = std::chrono::steady_clock;

bool HasIp(const std::string& path, const std::string& ip) {
  InspectedCertificate cert = InspectCertificateFile(path);
  return std::find(cert.ip_addresses.begin(), cert.ip_addresses.end(), ip) !=
         cert.ip_addresses.end();
}

int Run(int runs, double kube_api_qps) {
  TempDir dir;
  FakeKubeApi api;
  const std::string kubeconfig =
      WriteKubeconfig(dir.Sub("kubeconfig"), api.url(), api.server_ca_pem());
  Daemon daemon(dir.Sub("node"));
  if (!daemon.Start({"--issuer=cert-manager", "--kubeconfig=" + kubeconfig,
                     "--kube-api-qps=" + std::to_string(kube_api_qps)})) {
    std::fprintf(stderr, "certmountd did not start:\n%s\n", daemon.log().c_str());
    return 1;
  }
  std::vector<double> delays_ms;
  for (int run = 0; run < runs; ++run) {
    const std::string pod = "web-" + std::to_string(run);
    const std::string uid = "uid-" + std::to_string(run);
    const std::string ip = "10.244.0." + std::to_string(run + 1);
    api.PutPod("default", pod, uid);
    const std::string target = daemon.PodTarget(pod);
    auto request = KubeletPublishRequest("csi-bench-" + std::to_string(run), target,
                                         {{"csi.storage.k8s.io/pod.name", pod},
                                          {"csi.storage.k8s.io/pod.uid", uid},
                                          {"csi.cert-manager.io/issuer-name", "ca"},
                                          {"csi.cert-manager.io/key-algorithm", "ECDSA"},
                                          {"csi.cert-manager.io/dns-names", pod + ".default.svc"},
                                          {"csi.cert-manager.io/ip-sans", "${POD_IP}"}});
    csi::v1::NodePublishVolumeResponse response;
    grpc::Status published =
        daemon.node().NodePublishVolume(CallContext().get(), request, &response);
    if (!published.ok()) {
      std::fprintf(stderr, "publish failed: %s\n", published.error_message().c_str());
      return 1;
    }
    // The watch starts with the first such volume; time only from when it is open.
    if (!api.WaitUntil([&] { return api.Count("GET", "/api/v1/pods", true) > 0; },
                       std::chrono::seconds(10))) {
      std::fprintf(stderr, "the pod watch did not open\n%s\n", daemon.log().c_str());
      return 1;
    }
    const auto started = Clock::now();
    api.SetPodIps("default", pod, {ip});
    while (!HasIp(target + "/tls.crt", ip)) {
      if (Clock::now() - started > std::chrono::seconds(30)) {
        std::fprintf(stderr, "run %d: no certificate with %s after 30 s\n", run, ip.c_str());
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    delays_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - started).count());
    if (getenv("POD_IP_BENCH_TRACE") != nullptr) {
      std::fprintf(stderr, "run %d: %.1f ms, ips set at %lld ms\n", run, delays_ms.back(),
                   static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count() -
                                          static_cast<long long>(delays_ms.back())));
    }
  }
  if (getenv("POD_IP_BENCH_TRACE") != nullptr) std::fprintf(stderr, "%s\n", daemon.log().c_str());
  std::vector<double> sorted = delays_ms;
  std::sort(sorted.begin(), sorted.end());
  std::printf(
      "pod IP appears -> tls.crt with the IP SAN, %d runs (cert-manager issuer, fake API server, "
      "--kube-api-qps=%g)\n",
      runs, kube_api_qps);
  std::printf("  median %.1f ms  min %.1f ms  max %.1f ms\n", sorted[sorted.size() / 2],
              sorted.front(), sorted.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20;
  double kube_api_qps = 5;  // certmountd's default
  CLI::App app{"pod_ip_bench: delay from a pod's IP appearing to its certificate carrying it"};
  app.add_option("--runs", runs, "pods timed")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--kube-api-qps", kube_api_qps,
                 "certmountd's client-side limit; each re-issue makes about three calls")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return Run(runs, kube_api_qps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pod_ip_bench: %s\n", e.what());
    return 1;
  }
}
