"""Configuration: the option catalog (one declaration per option), the rules between options, librdkafka client settings."""
