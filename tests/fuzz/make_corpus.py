#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target under corpus/<target>/: valid inputs
laid out as the wire structs are (wire.hpp, channel_state.hpp, hybrid_address.cpp,
transport.hpp, mailbox.hpp, tcp_wire.hpp) and a few edge cases. Run it again after a format changes."""
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def constant(path, name):
    """The value of `constexpr ... name = value;` in a source file: the seeds
    follow the format's version without anyone editing this file."""
    with open(os.path.join(ROOT, path)) as source:
        match = re.search(r"constexpr[^;=]*\b" + name + r"\s*=\s*(0x[0-9a-fA-F]+|\d+)", source.read())
    if match is None:
        sys.exit(f"make_corpus.py: {name} not found in {path}")
    return int(match.group(1), 0)


WIRE_MAGIC = constant("runtime/messaging/wire.hpp", "kWireMagic")
WIRE_VERSION = constant("runtime/messaging/wire.hpp", "kWireVersion")
HELLO_MAGIC = constant("persist/channel_state.hpp", "kHelloMagic")
HELLO_VERSION = constant("persist/channel_state.hpp", "kHelloVersion")
HYBRID_MAGIC = constant("transport/hybrid/hybrid_address.cpp", "kAddressMagic")
EAGER, RTS, CTS, FIN, CREDIT, CHANNEL, ABORT = 1, 2, 3, 4, 7, 8, 9
ERRC_TRANSPORT = 9
CHANNEL_BIT = 1 << 63
USES_CREDIT = 1


def header(kind, source=1, tag=7, sequence=0, message_bytes=0, magic=WIRE_MAGIC, version=WIRE_VERSION,
           credits_returned=0, flags=0):
    return struct.pack("<HBBIiIQII", magic, version, kind, source, tag, sequence, message_bytes, credits_returned,
                       flags)


def remote(address=0x10000, key=0x300000002, base=0x10000, length=4096):
    return struct.pack("<QQQQ", address, key, base, length)


def wire_seeds():
    job = bytes([1])  # a job of 2 ranks
    payload = b"hello"
    rts_put = struct.pack("<II", 4, 1) + remote() + bytes([1]) + bytes(7)
    rts_get = struct.pack("<II", 4, 1) + remote(length=1 << 20) + bytes([2]) + bytes(7)
    cts = struct.pack("<IIII", 4, 1, 9, 2) + remote(length=1 << 20) + struct.pack("<QQ", 1 << 20, 1 << 18)
    return {
        "eager": job + header(EAGER, message_bytes=len(payload), flags=USES_CREDIT) + payload,
        "eager-no-credit": job + header(EAGER, message_bytes=len(payload)) + payload,
        "credit": job + header(CREDIT, credits_returned=32),
        "eager-empty": job + header(EAGER),
        "rts-put": job + header(RTS, message_bytes=1 << 20) + rts_put,
        "rts-get": job + header(RTS, message_bytes=1 << 20) + rts_get,
        "cts": job + header(CTS, message_bytes=1 << 20) + cts,
        "fin": job + header(FIN) + struct.pack("<II", 4, 1),
        "abort": job + header(ABORT, message_bytes=ERRC_TRANSPORT) + struct.pack("<IIQ", 4, 1, 2),
        "channel-data": job + header(CHANNEL, message_bytes=len(payload)) +
        struct.pack("<QQ", CHANNEL_BIT | (1 << 44) | len(payload), CHANNEL_BIT | (2 << 44) | (0xFFF << 32) | 1) + payload,
        "channel-credits": job + header(CHANNEL) + struct.pack("<QQ", 0, CHANNEL_BIT | (2 << 44) | (0xFFF << 32) | 3),
        "truncated": job + header(EAGER)[:20],
        "bad-magic": job + header(EAGER, magic=0xBAD1),
        "rank-out-of-range": bytes([0]) + header(EAGER, source=1),
    }


BY_POSITION, BY_ARRIVAL = 0, 1


def hello(role, tag=7, slots=4, slot_bytes=4096, partitions=1, landing_length=16384, channel_id=3,
          landing_order=BY_POSITION):
    return (struct.pack("<HBBIiIQII", HELLO_MAGIC, HELLO_VERSION, role, channel_id, tag, slots, slot_bytes,
                        partitions, 8192) + remote(length=landing_length) + remote(length=slots * 64) +
            bytes([landing_order]) + bytes(7) + remote(address=0, key=0, base=0, length=0))  # no split source


def hello_seeds():
    # This side: role byte (0 send, 1 receive), tag, slots - 1, slot_bytes, partitions - 1,
    # landing order (0 by position, 1 by arrival).
    send_side = bytes([0]) + struct.pack("<iHIBB", 7, 3, 4096, 0, BY_POSITION)
    receive_side = bytes([1]) + struct.pack("<iHIBB", 7, 3, 4096, 0, BY_POSITION)
    ordered_send_side = bytes([0]) + struct.pack("<iHIBB", 7, 3, 4096, 0, BY_ARRIVAL)
    return {
        "sender-gets-receiver-hello": send_side + hello(2),
        "receiver-gets-sender-hello": receive_side + hello(1, landing_length=8),
        "shape-mismatch": send_side + hello(2, slots=8),
        "landing-too-small": send_side + hello(2, landing_length=100),
        "short": send_side + hello(2)[:40],
        "ordered-sender-gets-ordered-hello": ordered_send_side + hello(2, landing_order=BY_ARRIVAL),
        "landing-order-mismatch": ordered_send_side + hello(2),
    }


def notification(channel, slot, value):
    return struct.pack("<Q", (1 << 63) | (channel << 44) | (slot << 32) | value)


def notification_seeds():
    # slots - 1, partitions - 1, slot_bytes / partitions - 1, messages started, and for
    # non-partitioned channels whether landings are ordered (odd: the sender picks slots).
    single = struct.pack("<BBHHB", 3, 0, 255, 8, 0)
    ordered = struct.pack("<BBHHB", 3, 0, 255, 8, 1)
    partitioned = struct.pack("<BBHH", 3, 3, 63, 8)
    credits = notification(2, 0xFFF, 2) + notification(2, 0xFFF, 100)
    return {
        "landings": single + notification(1, 0, 100) + notification(1, 1, 256) + notification(1, 4, 1),
        "partitions": partitioned + b"".join(notification(1, 0, p) for p in (0, 1, 1, 2, 3, 4)),
        "credits": single + credits,
        "too-long": single + notification(1, 0, 257),
        "ordered-landings": ordered + notification(1, 2, 100) + notification(1, 2, 50) + notification(1, 0, 1)
        + notification(1, 4, 1),
    }


def hybrid(identity, local, network, magic=HYBRID_MAGIC):
    return struct.pack("<IHHI", magic, len(identity), len(local), len(network)) + identity + local + network


def hybrid_seeds():
    local = struct.pack("<IIiI", constant("transport/shm/mailbox.hpp", "kMailboxMagic"), 1234, 5, 64)
    return {
        "two-parts": hybrid(b"node-a/boot/net:1/pid:2", local, bytes(range(24))),
        "empty-parts": hybrid(b"", b"", b""),
        "bad-magic": hybrid(b"n", local, b"", magic=1),
        "length-lies": hybrid(b"node", local, b"")[:-3],
    }


def remote_buffer_seeds():
    return {"valid": remote(), "short": remote()[:31], "long": remote() + b"\0"}


def mailbox_seeds():
    # the reader flag (1: a reader takes odd-first-byte messages in place), then 2 receives
    receives = bytes([1, 2]) + struct.pack("<HH", 8256, 16)
    no_reader = bytes([0, 2]) + struct.pack("<HH", 8256, 16)

    def ring(owner, head, tail):
        return bytes([owner]) + struct.pack("<HH", head, tail)

    rings = struct.pack("<II", 64, 1) + ring(1, 0, 2) + ring(0, 0, 0) + ring(0, 0, 0)
    near_end = struct.pack("<II", 64, 1) + ring(1, 8190, 8194) + ring(0, 0, 0) + ring(0, 0, 0)

    def entry(ring_index, cell, kind, length, note=0, fill=0x5A, sequence=None, flags=0):
        ready = cell + 1 if sequence is None else sequence  # head 0: an entry at cell k is ready at sequence k + 1
        return struct.pack("<BHHBBIQB", ring_index, cell, ready, kind, flags, length, note, fill)

    return {
        # 100 bytes and a 24-byte header take cells 0-1; the next entry starts at cell 2
        "two-messages": receives + rings + entry(0, 0, 1, 100) + entry(0, 2, 1, 8256),
        "two-messages-no-reader": no_reader + rings + entry(0, 0, 1, 100) + entry(0, 2, 1, 8256),
        # a payload word at a cell start that a later lap's sequence could equal: cleared when taken
        "flagged-message": receives + rings + entry(0, 0, 1, 200, flags=1) + entry(0, 4, 1, 8),
        "oversize-entry": receives + rings + entry(0, 0, 1, 9000) + entry(0, 1, 3, 4),
        "remote-write": receives + rings + entry(0, 0, 2, 64, note=0x8000100000000040) + entry(0, 1, 1, 0),
        "wild-sequence": receives + rings + entry(0, 0, 1, 16, sequence=8193) + entry(0, 1, 1, 16),
        # head at cell 8190 of 8192: a padding entry, then a message at cell 0 of the next lap
        "padding-wrap": receives + near_end + entry(0, 8190, 3, 2) + entry(0, 0, 1, 40, sequence=8193),
        "padding-wrap-no-reader": no_reader + near_end + entry(0, 8190, 3, 2) + entry(0, 0, 1, 40, sequence=8193),
        "message-past-the-end": receives + near_end + entry(0, 8190, 1, 200),
        "lying-header": bytes([1, 1]) + struct.pack("<H", 64) + struct.pack("<II", 0xFFFFFFFF, 0xFFFFFFFF)
        + ring(200, 100, 1) + ring(0, 70, 2) + ring(0, 1, 0),
    }


TCP_FRAME_MAGIC = constant("transport/tcp/tcp_wire.hpp", "kFrameMagic")
TCP_ADDRESS_MAGIC = constant("transport/tcp/tcp_wire.hpp", "kAddressMagic")
TCP_WIRE_VERSION = constant("transport/tcp/tcp_wire.hpp", "kWireVersion")
TCP_HELLO, TCP_MESSAGE, TCP_WRITE, TCP_READ_REQUEST, TCP_READ_RESPONSE, TCP_WRITE_ACK, TCP_ANSWER = range(1, 8)
TCP_WINDOW = 0x7E0000000000  # fuzz_tcp_frames.cpp maps its registered window here
TCP_KEY = 0x4B4B4B4B4B4B4B4B  # "KKKKKKKK": the target puts the window's random key in its place
TCP_TOKEN = 0x5454545454545454  # "TTTTTTTT": the target puts its endpoint's token in its place


def tcp_frame(kind, length=0, operation=0, address=0, key=0, notification=0, flags=0, magic=TCP_FRAME_MAGIC):
    return struct.pack("<IBBHQQQQQ", magic, kind, flags, 0, length, operation, address, key, notification)


def tcp_frame_seeds():
    address = struct.pack("<IHHIIQQ", TCP_ADDRESS_MAGIC, TCP_WIRE_VERSION, 0x3412, 0x0100007F, 4242, 7, 0)
    greeting = address + struct.pack("<Q", TCP_TOKEN)  # who we are, and the target's token
    hello = tcp_frame(TCP_HELLO, len(greeting)) + greeting
    return {
        "hello-message": hello + tcp_frame(TCP_MESSAGE, 5) + b"hello",
        "message-too-long": hello + tcp_frame(TCP_MESSAGE, 100) + bytes(100),
        "write-notify": hello + tcp_frame(TCP_WRITE, 8, 1, TCP_WINDOW + 64, TCP_KEY, 99, flags=1) + b"landings",
        "write-bad-key": hello + tcp_frame(TCP_WRITE, 8, 2, TCP_WINDOW, 77) + b"forgedkk",
        "write-past-window": hello + tcp_frame(TCP_WRITE, 64, 3, TCP_WINDOW + 4090, TCP_KEY) + bytes(64),
        "read": hello + tcp_frame(TCP_READ_REQUEST, 16, 4, TCP_WINDOW, TCP_KEY),
        "stray-answers": hello + tcp_frame(TCP_WRITE_ACK, 0, 12345) + tcp_frame(TCP_READ_RESPONSE, 4, 6) + b"abcd",
        "broken-magic": tcp_frame(TCP_MESSAGE, 5, magic=0xDEADBEEF) + b"hello",
        "hello-wrong-token": tcp_frame(TCP_HELLO, len(greeting)) + address + b"guessed!" + tcp_frame(TCP_MESSAGE, 5) + b"hello",
    }


TARGETS = {
    "tether-fuzz-wire": wire_seeds,
    "tether-fuzz-channel-hello": hello_seeds,
    "tether-fuzz-channel-notification": notification_seeds,
    "tether-fuzz-hybrid-address": hybrid_seeds,
    "tether-fuzz-remote-buffer": remote_buffer_seeds,
    "tether-fuzz-shm-mailbox": mailbox_seeds,
    "tether-fuzz-tcp-frames": tcp_frame_seeds,
}


def main():
    for target, seeds in TARGETS.items():
        directory = os.path.join(HERE, "corpus", target)
        os.makedirs(directory, exist_ok=True)
        for name, data in seeds().items():
            with open(os.path.join(directory, name), "wb") as out:
                out.write(data)
    print(f"seed corpus written for {len(TARGETS)} targets under {os.path.join(HERE, 'corpus')}", file=sys.stderr)


if __name__ == "__main__":
    main()
