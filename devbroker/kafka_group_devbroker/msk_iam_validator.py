"""A broker-side OAUTHBEARER validator that also accepts AWS MSK IAM tokens (by their form), for tests.

AWS MSK's brokers take, over SASL/OAUTHBEARER, a token that is the base64url of a
SigV4-presigned ``https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect&...``
URL. Apache Kafka has no validator for it; :data:`JAVA_SOURCE` is one, compiled with ``javac``
against the cached Kafka jars when a :class:`~kafka_group_devbroker.secured_kafka.SecuredKafka`
starts (:func:`compile_validator`). It extends Kafka's unsecured validator (JWS tokens with
``alg: none`` keep working) and, for a token that decodes to such a URL, checks its form:
the host, ``Action=kafka-cluster:Connect``, ``X-Amz-Algorithm=AWS4-HMAC-SHA256``, an
``X-Amz-Credential`` of ``<access key id>/<date>/<region>/kafka-cluster/aws4_request`` whose
region is the host's, ``X-Amz-Date`` and ``X-Amz-Expires`` not yet past, ``X-Amz-SignedHeaders``
and a hexadecimal ``X-Amz-Signature``. The principal is the access key id (``User:<key id>``).

**The AWS signature itself is not verified** (that needs AWS): any well-formed signed URL passes.
This is a test of what the client sends, not a security mechanism.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kafka_group.errors import EmbeddedBrokerError

__all__ = ["JAVA_SOURCE", "VALIDATOR_CLASS", "compile_validator"]

VALIDATOR_CLASS = "kafkagroup.devbroker.MskIamOrUnsecuredValidator"

JAVA_SOURCE = r"""
package kafkagroup.devbroker;

import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallback;
import org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler;

/** Kafka's unsecured validator, plus AWS MSK IAM signed-URL tokens checked by form (not by signature). */
public class MskIamOrUnsecuredValidator extends OAuthBearerUnsecuredValidatorCallbackHandler {
    private static final DateTimeFormatter AMZ_DATE = DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'");

    @Override
    public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
        List<Callback> rest = new ArrayList<>();
        for (Callback callback : callbacks) {
            if (callback instanceof OAuthBearerValidatorCallback) {
                OAuthBearerValidatorCallback validation = (OAuthBearerValidatorCallback) callback;
                String url = decoded(validation.tokenValue());
                if (url != null) {
                    String refusal = check(url, validation);
                    if (refusal != null) {
                        validation.error("invalid_token", null, null);
                    }
                    continue;
                }
            }
            rest.add(callback);
        }
        if (!rest.isEmpty()) {
            super.handle(rest.toArray(new Callback[0]));
        }
    }

    /** The URL a token without dots (not a JWS) decodes to, or null. */
    private static String decoded(String token) {
        if (token == null || token.contains(".")) {
            return null;
        }
        try {
            String url = new String(Base64.getUrlDecoder().decode(token), StandardCharsets.UTF_8);
            return url.startsWith("https://") ? url : null;
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    /** Null when the URL is a well-formed MSK IAM connect URL (then the token is set), else why not. */
    private static String check(String url, OAuthBearerValidatorCallback validation) {
        URI uri = URI.create(url);
        String host = uri.getHost();
        if (host == null || !host.matches("kafka\\.[a-z0-9-]+\\.amazonaws\\.com")) {
            return "host";
        }
        String region = host.split("\\.")[1];
        Map<String, String> query = new HashMap<>();
        for (String pair : uri.getRawQuery() == null ? new String[0] : uri.getRawQuery().split("&")) {
            int eq = pair.indexOf('=');
            if (eq > 0) {
                query.put(URLDecoder.decode(pair.substring(0, eq), StandardCharsets.UTF_8),
                          URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
            }
        }
        if (!"kafka-cluster:Connect".equals(query.get("Action"))
                || !"AWS4-HMAC-SHA256".equals(query.get("X-Amz-Algorithm"))
                || query.get("X-Amz-SignedHeaders") == null
                || query.get("X-Amz-Signature") == null || !query.get("X-Amz-Signature").matches("[0-9a-f]{64}")) {
            return "parameters";
        }
        String[] credential = query.getOrDefault("X-Amz-Credential", "").split("/");
        if (credential.length != 5 || credential[0].isEmpty() || !credential[2].equals(region)
                || !credential[3].equals("kafka-cluster") || !credential[4].equals("aws4_request")) {
            return "credential";
        }
        long start;
        long lifetimeMs;
        try {
            start = LocalDateTime.parse(query.get("X-Amz-Date"), AMZ_DATE).toInstant(ZoneOffset.UTC).toEpochMilli();
            lifetimeMs = Long.parseLong(query.get("X-Amz-Expires")) * 1000L;
        } catch (RuntimeException e) {
            return "date";
        }
        long expires = start + lifetimeMs;
        if (expires <= System.currentTimeMillis()) {
            return "expired";
        }
        String principal = credential[0];
        String value = validation.tokenValue();
        validation.token(new OAuthBearerToken() {
            public String value() { return value; }
            public Set<String> scope() { return Collections.emptySet(); }
            public long lifetimeMs() { return expires; }
            public String principalName() { return principal; }
            public Long startTimeMs() { return start; }
        });
        return null;
    }
}
"""


def compile_validator(folder: Path, classpath: str) -> Path:
    """Compile :data:`JAVA_SOURCE` into ``folder/classes`` against ``classpath`` (Kafka's jars); returns that folder.

    Raises
    ------
    EmbeddedBrokerError
        No ``javac`` (a JDK, not only a JRE, is needed), or it failed (its output is in the message).
    """
    javac = shutil.which("javac")
    if javac is None:
        raise EmbeddedBrokerError("no 'javac' on PATH: the secured development broker compiles its MSK IAM token "
                                  "validator with it (install a JDK 17 or newer)")
    source = folder / "src" / "kafkagroup" / "devbroker" / "MskIamOrUnsecuredValidator.java"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(JAVA_SOURCE, encoding="utf-8")
    classes = folder / "classes"
    classes.mkdir(exist_ok=True)
    done = subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(classes), str(source)],
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise EmbeddedBrokerError(f"javac failed on the MSK IAM validator: {done.stdout}{done.stderr}"[-4000:])
    return classes
