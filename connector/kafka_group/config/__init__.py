"""Configuration: the option catalog (one declaration per option), the parsed options, the rules
between options, librdkafka client settings."""
