// Small socket helpers tcp-own's files share.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace tether::transport::tcp {

inline std::string dotted(std::uint32_t ipv4) {
  char text[INET_ADDRSTRLEN] = {};
  in_addr address{ipv4};
  ::inet_ntop(AF_INET, &address, text, sizeof text);
  return text;
}

inline void set_no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// "ip:port" of the other end of a connected socket, for logs.
inline std::string remote_of(int fd) {
  sockaddr_in remote{};
  socklen_t length = sizeof remote;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &length) != 0) return "a process";
  return dotted(remote.sin_addr.s_addr) + ":" + std::to_string(ntohs(remote.sin_port));
}

inline bool loopback(std::uint32_t ipv4) { return (ntohl(ipv4) >> 24) == 127; }

// A peer at a loopback address or at this endpoint's own address is on this host: the
// kernel carries the connection over lo.
inline bool same_host(std::uint32_t remote_ipv4, std::uint32_t own_ipv4) {
  return loopback(remote_ipv4) || remote_ipv4 == own_ipv4;
}

// TETHER_TCP_SOCKET_BUFFER, before connect or listen (the window scale is fixed then).
inline void set_buffers(int fd, int bytes) {
  if (bytes <= 0) return;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

}  // namespace tether::transport::tcp
