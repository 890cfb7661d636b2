# Gearshift in a container: a multi-stage build, a small Debian runtime,
# a non-root user, the durable store on a volume, and a healthcheck that
# asks the server itself for its version over the Gearman port.
#
#   docker build -t gearshift .
#   docker run -d --name gearshift -p 4730:4730 -p 4731:4731 \
#       -v gearshift-data:/var/lib/gearshift gearshift
#   docker run ... gearshift -L 0.0.0.0 --config /etc/gearshift/gearshift.toml
#
# Arguments after the image name replace CMD (keep -L 0.0.0.0 so the port
# is reachable from outside the container).

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p gearshift \
 && strip target/release/gearshift \
 && ./target/release/gearshift man --out /out/man

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 gearshift \
 && useradd --system --uid 10001 --gid gearshift --home-dir /var/lib/gearshift \
      --shell /usr/sbin/nologin gearshift \
 && install -d -o gearshift -g gearshift -m 0750 /var/lib/gearshift
COPY --from=build /src/target/release/gearshift /usr/bin/gearshift
COPY --from=build /out/man /usr/share/man/man1
COPY docs/gearshift.example.toml /usr/share/doc/gearshift/examples/
USER gearshift
VOLUME ["/var/lib/gearshift"]
EXPOSE 4730 4731
# A first SIGTERM lets running jobs finish (give `docker stop -t 90` time).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["gearshift", "admin", "-s", "127.0.0.1:4730", "--timeout", "4s", "version"]
ENTRYPOINT ["gearshift", "serve", "--data-dir", "/var/lib/gearshift", "--log-format", "json"]
CMD ["-L", "0.0.0.0", "--http", "0.0.0.0:4731"]
