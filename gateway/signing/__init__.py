"""S3 remote signing on the node: the sign request's checks and the local SigV4 signer."""
