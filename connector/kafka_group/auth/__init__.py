"""Token providers of SASL/OAUTHBEARER: the ``tokenProvider`` hook, AWS MSK IAM, and the one factory of Kafka clients."""
