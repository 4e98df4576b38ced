// Generates v1a_vectors.json: Standard Webhooks signature vectors computed
// with Node.js's own crypto (ed25519 and HMAC-SHA256), independently of the
// Go package they test. Run from this directory:
//
//	node v1a_vectors.mjs > v1a_vectors.json
//
// Ed25519 signatures are deterministic, so the output never changes; the
// test TestVectorsMatchNode re-runs this script when node is installed and
// compares.
import crypto from "node:crypto";

// An ed25519 private key from its 32-byte seed, through PKCS#8 DER.
function privateKey(seed) {
  const pkcs8Prefix = Buffer.from("302e020100300506032b657004220420", "hex");
  return crypto.createPrivateKey({ key: Buffer.concat([pkcs8Prefix, seed]), format: "der", type: "pkcs8" });
}

function publicKeyBytes(key) {
  return Buffer.from(crypto.createPublicKey(key).export({ format: "jwk" }).x, "base64url");
}

// One signer key: an ed25519 seed (written as whsk_ of seed||public key,
// or of the seed alone when short) or an HMAC key (written as whsec_).
function signerKey(k) {
  if (k.hmac) {
    return {
      secret: "whsec_" + k.hmac.toString("base64"),
      verify: "whsec_" + k.hmac.toString("base64"),
      sign: (content) => "v1," + crypto.createHmac("sha256", k.hmac).update(content).digest("base64"),
    };
  }
  const priv = privateKey(k.seed);
  const pub = publicKeyBytes(priv);
  const whsk = k.short ? k.seed : Buffer.concat([k.seed, pub]);
  return {
    secret: "whsk_" + whsk.toString("base64"),
    verify: "whpk_" + pub.toString("base64"),
    sign: (content) => "v1a," + crypto.sign(null, content, priv).toString("base64"),
  };
}

const seq = (n, f) => Buffer.from(Array.from({ length: n }, (_, i) => f(i)));

const cases = [
  {
    // Svix's test key and the Standard Webhooks test message: the spec's
    // example header shows this v1a signature.
    name: "svix key, spec message",
    keys: [{ seed: Buffer.from("6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==", "base64").subarray(0, 32) }],
    id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
    timestamp: 1614265330,
    body: Buffer.from('{"test": 2432232314}'),
  },
  {
    name: "empty body",
    keys: [{ seed: seq(32, (i) => i) }],
    id: "evt_1",
    timestamp: 1700000000,
    body: Buffer.alloc(0),
  },
  {
    name: "seed-only whsk, binary body",
    keys: [{ seed: seq(32, (i) => 255 - i), short: true }],
    id: "018f6b7e-3c5a-7d2e-9b1f-2a4c6e8f0a1b",
    timestamp: 1764460800,
    body: Buffer.concat([Buffer.from('{"amount":9900,"note":"caf\u00e9 \u20ac"}\n'), seq(16, (i) => i * 17)]),
  },
  {
    name: "rotation from v1 to v1a",
    keys: [{ hmac: Buffer.from("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "base64") }, { seed: seq(32, (i) => (i * 7 + 3) % 256) }],
    id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
    timestamp: 1614265330,
    body: Buffer.from('{"test": 2432232314}'),
  },
  {
    name: "two ed25519 keys",
    keys: [{ seed: seq(32, (i) => i) }, { seed: seq(32, (i) => 255 - i) }],
    id: "order-42",
    timestamp: 1614265330,
    body: Buffer.from('{"order_id":42,"status":"paid"}'),
  },
];

const vectors = cases.map((c) => {
  const keys = c.keys.map(signerKey);
  const content = Buffer.concat([Buffer.from(`${c.id}.${c.timestamp}.`), c.body]);
  return {
    name: c.name,
    secrets: keys.map((k) => k.secret),
    verify_with: keys.map((k) => k.verify),
    id: c.id,
    timestamp: c.timestamp,
    body_base64: c.body.toString("base64"),
    signature: keys.map((k) => k.sign(content)).join(" "),
  };
});

process.stdout.write(JSON.stringify({ generator: "testdata/v1a_vectors.mjs (Node.js crypto)", vectors }, null, 2) + "\n");
