"""Network: a job has no route anywhere, no name resolution, and no Docker socket."""

from __future__ import annotations

import pytest

from gym_sysmath.verdicts import Verdict
from tests.hostile.conftest import ALL_PATHS
from tests.hostile.payloads import PROBE_HIT

pytestmark = pytest.mark.docker

CPP_CONNECT = """
    auto connects = [](int family, int type, const char* host, int port) {
        int fd = socket(family, type, 0);
        if (fd < 0) return false;
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(port);
        inet_pton(AF_INET, host, &address.sin_addr);
        bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
        if (ok && type == SOCK_DGRAM) ok = send(fd, "x", 1, 0) == 1;
        close(fd);
        return ok;
    };
"""


@ALL_PATHS
def test_tcp_egress(attack, language):
    attack(language, Verdict.CORRECT,
           python=("import os, socket\nfor host in ('1.1.1.1', '8.8.8.8', '172.17.0.1'):\n    try:\n"
                   "        socket.create_connection((host, 80), timeout=1).close()\n    except OSError:\n        continue\n"
                   f"    os._exit({PROBE_HIT})"),
           cpp=CPP_CONNECT + f'    for (const char* host : {{"1.1.1.1", "8.8.8.8", "172.17.0.1"}})\n'
                             f"        if (connects(AF_INET, SOCK_STREAM, host, 80)) _exit({PROBE_HIT});",
           rust=("    for host in [\"1.1.1.1:80\", \"8.8.8.8:80\", \"172.17.0.1:80\"] {\n"
                 "        let address: std::net::SocketAddr = host.parse().unwrap();\n"
                 "        if std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(1)).is_ok() {\n"
                 f"            std::process::exit({PROBE_HIT});\n        }}\n    }}"))


@ALL_PATHS
def test_udp_egress(attack, language):
    attack(language, Verdict.CORRECT,
           python=("import os, socket\n"
                   "try:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('1.1.1.1', 53))\n"
                   f"except OSError:\n    pass\nelse:\n    os._exit({PROBE_HIT})"),
           cpp=CPP_CONNECT + f'    if (connects(AF_INET, SOCK_DGRAM, "1.1.1.1", 53)) _exit({PROBE_HIT});',
           rust=("    if let Ok(probe) = std::net::UdpSocket::bind(\"0.0.0.0:0\") {\n"
                 f"        if probe.send_to(b\"x\", \"1.1.1.1:53\").is_ok() {{ std::process::exit({PROBE_HIT}); }}\n"
                 "    }"))


@ALL_PATHS
def test_dns_lookup(attack, language):
    attack(language, Verdict.CORRECT,
           python=("import os, socket\ntry:\n    socket.getaddrinfo('deb.debian.org', 80)\nexcept OSError:\n    pass\n"
                   f"else:\n    os._exit({PROBE_HIT})"),
           cpp=("    addrinfo* found = nullptr;\n"
                f'    if (getaddrinfo("deb.debian.org", "80", nullptr, &found) == 0) _exit({PROBE_HIT});'),
           rust=("    use std::net::ToSocketAddrs;\n"
                 f"    if (\"deb.debian.org\", 80).to_socket_addrs().is_ok() {{ std::process::exit({PROBE_HIT}); }}"))


@ALL_PATHS
def test_reaching_the_docker_socket_or_the_host(attack, language):
    sockets = ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock")
    attack(language, Verdict.CORRECT,
           python=("import os, socket\n"
                   f"for path in {sockets!r}:\n"
                   "    try:\n        socket.socket(socket.AF_UNIX).connect(path)\n    except OSError:\n        continue\n"
                   f"    os._exit({PROBE_HIT})\n"
                   "for port in (2375, 2376, 22):\n    try:\n"
                   "        socket.create_connection(('172.17.0.1', port), timeout=1).close()\n"
                   "    except OSError:\n        continue\n"
                   f"    os._exit({PROBE_HIT})"),
           cpp=CPP_CONNECT + (
               f'    for (const char* path : {{"{sockets[0]}", "{sockets[1]}", "{sockets[2]}"}}) {{\n'
               "        int fd = socket(AF_UNIX, SOCK_STREAM, 0);\n"
               "        sockaddr_un address{};\n        address.sun_family = AF_UNIX;\n"
               "        std::strcpy(address.sun_path, path);\n"
               f"        if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) _exit({PROBE_HIT});\n"
               "        close(fd);\n    }\n"
               f'    for (int port : {{2375, 2376, 22}}) if (connects(AF_INET, SOCK_STREAM, "172.17.0.1", port)) _exit({PROBE_HIT});'),
           rust=(f"    for path in {list(sockets)!r} {{\n".replace("'", '"')
                 + f"        if std::os::unix::net::UnixStream::connect(path).is_ok() {{ std::process::exit({PROBE_HIT}); }}\n"
                 "    }\n    for port in [2375u16, 2376, 22] {\n"
                 "        let address = std::net::SocketAddr::from(([172, 17, 0, 1], port));\n"
                 "        if std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(1)).is_ok() {\n"
                 f"            std::process::exit({PROBE_HIT});\n        }}\n    }}"))
