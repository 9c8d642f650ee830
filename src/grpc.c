/* grpc: not written yet */
