{
  "targets": [
    {
      "target_name": "jpeg",
      "sources": ["jpeg.c"],
      "libraries": ["-ljpeg"],
      "cflags": ["-O2", "-Wall"]
    }
  ]
}
