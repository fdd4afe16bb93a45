#!/usr/bin/env python3
"""Adds N agent users to a tenant through the API (as its admin), logs each in and prints their
access tokens as a shell assignment for benchmarks/flood: BENCH_USER_TOKENS=t1,t2,...
Stdlib only.   prepare_users.py HOST:PORT ADMIN_EMAIL PASSWORD N TAG"""
import http.client
import sys

from prepare import call


def login(conn, email, password):
    return call(conn, "POST", "/api/v1/auth/login",
                {"email": email, "password": password})["access_token"]


def main():
    host, port = sys.argv[1].split(":")
    email, password, count, tag = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    admin = login(conn, email, password)
    tokens = []
    for i in range(1, count + 1):
        user_email = f"{tag}-user{i}@bench.example"
        call(conn, "POST", "/api/v1/users", {"email": user_email, "full_name": f"User {i}",
                                             "password": password, "role": "agent"}, admin)
        tokens.append(login(conn, user_email, password))
    print(f"BENCH_USER_TOKENS={','.join(tokens)}")


if __name__ == "__main__":
    main()
