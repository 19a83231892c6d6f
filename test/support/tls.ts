import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";

export interface TestPki {
  /** CA certificate (PEM) that signed the server and client certificates. */
  caFile: string;
  /** Server certificate + key in one PEM, as HAProxy's `crt` wants it. */
  serverPem: string;
  clientCert: string;
  clientKey: string;
  ca: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: "pipe" });
}

/** A throw-away CA with a server certificate for `serverName` and one client certificate, made with openssl. */
export function makePki(dir: string, serverName = "lb.test"): TestPki {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl(
    ["req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=servicelb test CA", "-days", "2"],
    dir,
  );
  for (const [name, cn] of [
    ["server", serverName],
    ["client", "client"],
  ] as const) {
    openssl(["req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${cn}`], dir);
    writeFileSync(
      join(dir, `${name}.ext`),
      name === "server" ? `subjectAltName=DNS:${serverName}\n` : "extendedKeyUsage=clientAuth\n",
    );
    openssl(
      [
        "x509",
        "-req",
        "-in",
        `${name}.csr`,
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        `${name}.crt`,
        "-days",
        "2",
        "-extfile",
        `${name}.ext`,
      ],
      dir,
    );
  }
  const serverPem = join(dir, "server.pem");
  writeFileSync(
    serverPem,
    readFileSync(join(dir, "server.crt"), "utf8") + readFileSync(join(dir, "server.key"), "utf8"),
  );
  return {
    caFile: join(dir, "ca.crt"),
    serverPem,
    clientCert: join(dir, "client.crt"),
    clientKey: join(dir, "client.key"),
    ca: readFileSync(join(dir, "ca.crt"), "utf8"),
  };
}

/** A certificate issued by a TestPki's CA, with its own key. */
export interface IssuedCert {
  cert: string;
  key: string;
  /** SHA-1, colon-separated upper-case hex, as node:tls's getPeerCertificate() gives it. */
  fingerprint: string;
}

let issued = 0;

/**
 * A fresh server certificate for `serverName` from the CA makePki left in `dir` (a new key and
 * serial each call); `expired` dates it in 2020.
 */
export function issueServerCert(dir: string, serverName = "lb.test", opts: { expired?: boolean } = {}): IssuedCert {
  const name = `issued-${++issued}`;
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl(["req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${serverName}`], dir);
  writeFileSync(join(dir, `${name}.ext`), `subjectAltName=DNS:${serverName}\n`);
  if (opts.expired) {
    // `openssl x509 -req` dates a certificate from now; `openssl ca` takes any dates.
    writeFileSync(
      join(dir, `${name}.cnf`),
      "[ca]\ndefault_ca=d\n[d]\ndatabase=index.txt\nnew_certs_dir=.\nserial=ca.srl\ndefault_md=sha256\npolicy=p\nunique_subject=no\n[p]\ncommonName=supplied\n",
    );
    if (!existsSync(join(dir, "index.txt"))) writeFileSync(join(dir, "index.txt"), "");
    if (!existsSync(join(dir, "ca.srl"))) writeFileSync(join(dir, "ca.srl"), "01\n");
    openssl(
      ["ca", "-batch", "-config", `${name}.cnf`, "-startdate", "20200101000000Z", "-enddate", "20200102000000Z"]
        .concat(["-in", `${name}.csr`, "-out", `${name}.crt`, "-keyfile", "ca.key", "-cert", "ca.crt", "-notext"])
        .concat(["-extfile", `${name}.ext`]),
      dir,
    );
  } else
    openssl(
      ["x509", "-req", "-in", `${name}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial"].concat([
        "-out",
        `${name}.crt`,
        "-days",
        "2",
        "-extfile",
        `${name}.ext`,
      ]),
      dir,
    );
  const cert = readFileSync(join(dir, `${name}.crt`), "utf8");
  return {
    cert,
    key: readFileSync(join(dir, `${name}.key`), "utf8"),
    fingerprint: new X509Certificate(cert).fingerprint,
  };
}

export interface TlsAnswer {
  status: number;
  body: string;
  /** The CN of the certificate the handshake gave. */
  served: string;
}

/** One HTTPS request to the port with an SNI and a Host header, trusting the test CA only. */
export function httpsGet(port: number, pki: TestPki, sni: string, host = sni, path = "/"): Promise<TlsAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        servername: sni,
        ca: pki.ca,
        agent: false,
        headers: { host, connection: "close" },
      },
      (res) => {
        const served = String((res.socket as TLSSocket).getPeerCertificate().subject.CN);
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, served }));
      },
    );
    req.on("error", reject);
    req.setTimeout(5000, () => req.destroy(new Error(`GET https://${sni}${path} timed out`)));
    req.end();
  });
}
