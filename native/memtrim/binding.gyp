{
  "targets": [
    {
      "target_name": "memtrim",
      "sources": ["memtrim.c"],
      "libraries": ["-ldl"],
      "cflags": ["-O2", "-Wall"]
    }
  ]
}
