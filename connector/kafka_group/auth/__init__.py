"""Authentication with Kafka: token providers of SASL/OAUTHBEARER (the ``tokenProvider`` hook, AWS MSK IAM), the
one factory of Kafka clients, and refused logins and ACLs told as the connector's errors (:mod:`.access_errors`)."""
